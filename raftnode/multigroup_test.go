package raftnode

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestTwoGroupsShareOneServer nests two groups' routers under their group
// ids on one HTTP server, as a host running several groups would; each
// replicates on its own, and neither accepts the other's traffic.
func TestTwoGroupsShareOneServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	groups := map[string]*counterGroup{}
	for _, id := range []string{"alpha", "beta"} {
		g, err := Bootstrap(context.Background(), Config{
			NodeName: "n1", GroupID: id, DataDir: t.TempDir(), AdvertiseURL: base + "/g/" + id + "/raft",
			Secret: testSecret, Bootstrap: true, TickInterval: 20 * time.Millisecond, Logger: testLogger(t),
		}, counterApp{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		groups[id] = g
		r := g.Routers()
		mux.Handle("/g/"+id+"/raft/", http.StripPrefix("/g/"+id+"/raft", r.Raft))
		mux.Handle("/g/"+id+"/cluster/", http.StripPrefix("/g/"+id+"/cluster", r.Cluster))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		for _, g := range groups {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := g.Close(ctx); err != nil {
				t.Error(err)
			}
			cancel()
		}
	}()
	for id, add := range map[string]int64{"alpha": 3, "beta": 40} {
		g := groups[id]
		eventually(t, 10*time.Second, id+" to elect itself", g.IsLeader)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := g.ProposeAndWait(ctx, counterCmd{Add: add})
		cancel()
		if err != nil || r.Value != add {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
	}
	// alpha's admin client cannot drive beta: the group is part of what is signed.
	cross := &AdminClient{BaseURL: base + "/g/beta/cluster", Group: "alpha", Secret: testSecret}
	if err := cross.Do(context.Background(), http.MethodGet, "/members", nil, nil); err == nil {
		t.Fatal("beta accepted a call signed for alpha")
	}
	var doc MembershipJSON
	own := &AdminClient{BaseURL: base + "/g/beta/cluster", Group: "beta", Secret: testSecret}
	if err := own.Do(context.Background(), http.MethodGet, "/members", nil, &doc); err != nil || doc.Group != "beta" || len(doc.Members) != 1 {
		t.Fatalf("beta members: %+v %v", doc, err)
	}
	http.DefaultClient.CloseIdleConnections()
}
