package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/riftgate/riftgate/gateway"
	"github.com/riftgate/riftgate/gateway/cluster"
)

// clusterFlags are the start command's cluster options, spelled as the
// cluster documentation writes them.
var clusterFlags = []option{
	{name: "cluster-node-name", help: "run as a cluster member under this stable name (riftgate only; see docs/cluster.md)"},
	{name: "cluster-listen", help: "host:port of the peer listener: Raft, owner RPC and replica traffic"},
	{name: "cluster-advertise", help: "the URL peers reach --cluster-listen at (default http://<cluster-listen>)"},
	{name: "cluster-bootstrap", kind: kBool, def: "false", help: "start a new cluster with this node as its first member"},
	{name: "cluster-join", help: "comma-separated peer URLs of members to join through"},
	{name: "cluster-secret-file", help: "file holding the cluster's shared secret (else $" + secretEnv + ")"},
}

func init() {
	options = append(options, clusterFlags...)
	for _, o := range clusterFlags {
		commandOptions["start"] = append(commandOptions["start"], o.name)
	}
}

// secretEnv holds the cluster secret when --cluster-secret-file does not.
const secretEnv = "RIFTGATE_CLUSTER_SECRET"

// clusterOptions reads the --cluster-* options; ok is false when
// --cluster-node-name is not given (a single node).
func clusterOptions(s *settings) (opts cluster.Options, ok bool, err error) {
	name := s.str("cluster-node-name")
	if name == "" {
		for _, f := range []string{"cluster-listen", "cluster-advertise", "cluster-join", "cluster-secret-file"} {
			if s.str(f) != "" {
				return opts, false, usageErrorf("--%s needs --cluster-node-name", f)
			}
		}
		if s.boolean("cluster-bootstrap") {
			return opts, false, usageErrorf("--cluster-bootstrap needs --cluster-node-name")
		}
		return opts, false, nil
	}
	opts = cluster.Options{
		Name: name, Listen: s.str("cluster-listen"), Advertise: s.str("cluster-advertise"),
		Bootstrap: s.boolean("cluster-bootstrap"), DataDir: s.str("datadir"),
	}
	for _, u := range strings.Split(s.str("cluster-join"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			opts.Join = append(opts.Join, u)
		}
	}
	if f := s.str("cluster-secret-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return opts, false, fmt.Errorf("--cluster-secret-file: %w", err)
		}
		opts.Secret = bytes.TrimSpace(b)
	} else {
		opts.Secret = []byte(strings.TrimSpace(os.Getenv(secretEnv)))
	}
	if err := opts.Validate(); err != nil {
		return opts, false, usageErrorf("%s", err)
	}
	return opts, true, nil
}

// startCluster makes this process a cluster member and returns the seams
// it lends the engine, and how to stop it once the engine has stopped: the
// group (configuration, membership) and, on its membership, the flow
// runtime (owner RPC, replicas, adoption), whose sessions the peer
// listener serves under /flows/.
func startCluster(ctx context.Context, opts cluster.Options, maxFlows int, budget time.Duration, logger *slog.Logger) (*gateway.Cluster, func(), error) {
	opts.Logger = logger
	node, err := cluster.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	closeNode := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := node.Close(cctx); err != nil {
			logger.Error("stopping the cluster member", "err", err)
		}
	}
	flows, err := cluster.NewFlows(cluster.FlowsConfig{
		Membership: node, Config: node, Secret: opts.Secret,
		ShardPath: filepath.Join(opts.DataDir, "flow.db"), MaxFlows: maxFlows, Logger: logger,
		Deadline: budget,
	})
	if err != nil {
		closeNode()
		return nil, nil, err
	}
	node.Handle("/flows/", flows.Handler())
	node.CountFlows(flows.Count)
	node.SessionHealth(flows.LastExchange)
	stop := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := flows.Close(cctx); err != nil {
			logger.Error("stopping the flow runtime", "err", err)
		}
		closeNode()
	}
	return &gateway.Cluster{
		Log:        node.ConfigLog,
		Flows:      flows,
		Claims:     flows.Claims(),
		Cycles:     flows.Cycles(),
		Admin:      node.Admin(),
		Consistent: node.Barrier,
		Recordings: node.Recordings(),
		Metrics: func(w io.Writer) {
			node.WriteMetrics(w)
			flows.WriteMetrics(w)
		},
	}, stop, nil
}
