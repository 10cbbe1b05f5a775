package mbdocs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
	"github.com/riftgate/riftgate/gateway/mbdiff"
	"github.com/riftgate/riftgate/gateway/mbdocs"
)

// awaiting are the protocols riftgate does not serve yet, with who brings
// them. A scenario that uses one runs, and must fail, loudly, until the
// protocol lands; then its entry goes and the scenario must pass.
var awaiting = map[string]string{}

// TestDocs runs every example of every page of mb's documentation against
// riftgate.
func TestDocs(t *testing.T) {
	runDocs(t, gatewaytest.Binary(t), false)
}

// TestDocsOnMountebank runs the same examples against mb 2.9.1 itself, so
// that the runner is held to the pages' own server.
func TestDocsOnMountebank(t *testing.T) {
	runDocs(t, gatewaytest.Mountebank(t), true)
}

// runDocs starts the server as mb's own build runs it for these pages and
// runs each scenario in turn.
func runDocs(t *testing.T, bin string, isMB bool) {
	if testing.Short() {
		t.Skip("the docs suite starts a server and runs 70 scenarios")
	}
	ports := newPorts(t)
	admin := ports.like(mbdocs.DocPort)
	srv := gatewaytest.StartArgs(t, bin, "--port", strconv.Itoa(admin), "--allowInjection", "--localOnly")
	for try := 0; isMB && !startupInOrder(t, srv); try++ {
		// Under load mb's file transport can write its first two lines in
		// either order; the pages show the warning first.
		if try == 5 {
			t.Fatal("mb never wrote its startup lines in the order its pages show")
		}
		srv.Kill()
		if err := os.Remove(filepath.Join(srv.Dir, "mb.log")); err != nil {
			t.Fatal(err)
		}
		srv.Restart()
	}
	version := configVersion(t, srv)
	pages, err := mbdocs.Load(docsDir(t), mbdocs.Vars{Port: mbdocs.DocPort, CWD: srv.Dir, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	var waiting []string
	for _, p := range pages {
		for _, sc := range p.Scenarios {
			pending := ""
			for _, proto := range protocols(sc) {
				if why, ok := awaiting[proto]; ok && !isMB {
					pending = proto + ": " + why
				}
			}
			t.Run(sc.ID(), func(t *testing.T) {
				target := &mbdocs.Target{Dir: srv.Dir, Ports: ports.mapping(sc.Ports(), admin), Differences: !isMB}
				if !isMB {
					target.Awaiting = map[string]bool{}
					for line := range mbdiff.Awaiting {
						target.Awaiting[line] = true
					}
				}
				results, err := target.Run(context.Background(), sc)
				for i, r := range results {
					if len(r.Differences) > 0 {
						t.Logf("step %d passes by the listed differences %v", i+1, r.Differences)
					}
					for _, line := range r.Awaited {
						t.Logf("step %d: AWAITING %q from %s", i+1, line, mbdiff.Awaiting[line])
					}
					for _, line := range r.Arrived {
						t.Errorf("step %d: riftgate sends %q now: remove it from mbdiff.Awaiting", i+1, line)
					}
				}
				srv.Do("DELETE", "/imposters", nil)
				switch {
				case pending != "" && err == nil:
					t.Errorf("passes, but is listed as awaiting %s: remove the protocol from `awaiting`", pending)
				case pending != "":
					t.Logf("AWAITING %s: fails as it must until then: %v", pending, err)
					waiting = append(waiting, sc.ID())
				case err != nil:
					t.Error(err)
				}
			})
		}
	}
	if len(waiting) > 0 {
		t.Logf("%d scenarios await tcp/smtp imposters and fail until they land:\n  %s", len(waiting), strings.Join(waiting, "\n  "))
	}
}

var protocolField = regexp.MustCompile(`"protocol":\s*"(\w+)"`)

// protocols lists the protocols a scenario's requests use.
func protocols(sc *mbdocs.Scenario) []string {
	seen := map[string]bool{}
	for _, st := range sc.Steps {
		for _, m := range protocolField.FindAllStringSubmatch(st.Text, -1) {
			seen[m[1]] = true
		}
		switch {
		case st.Type == "smtp":
			seen["smtp"] = true
		case st.Type == "exec" && strings.Contains(st.Text, "| nc "):
			seen["tcp"] = true
		}
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func docsDir(t *testing.T) string {
	return filepath.Join(filepath.Dir(gatewaytest.Mountebank(t)), "..", "mountebank", "src", "views", "docs")
}

// startupInOrder waits for the server's two startup lines in GET /logs and
// tells whether the --allowInjection warning came first.
func startupInOrder(t *testing.T, srv *gatewaytest.Instance) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body := srv.Do("GET", "/logs", nil)
		var l struct {
			Logs []struct{ Level string } `json:"logs"`
		}
		if json.Unmarshal(body, &l) == nil && len(l.Logs) >= 2 {
			return l.Logs[0].Level == "warn"
		}
	}
	t.Fatal("the server wrote no startup lines to its logfile")
	return false
}

func configVersion(t *testing.T, srv *gatewaytest.Instance) string {
	status, body := srv.Do("GET", "/config", nil)
	var c struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(body, &c); status != 200 || err != nil {
		t.Fatalf("GET /config: %d %s", status, body)
	}
	return c.Version
}

// ports hands out free ports with as many digits as the page's own, so that
// every Content-Length the pages show stays right.
type ports struct {
	t *testing.T
}

func newPorts(t *testing.T) *ports { return &ports{t: t} }

// mapping maps the page's admin port to admin, and its other ports to free
// ones in the same order, so that lists sorted by port stay in the page's
// order.
func (p *ports) mapping(pagePorts []int, admin int) map[int]int {
	m := map[int]int{mbdocs.DocPort: admin}
	byDigits := map[int][]int{} // digit count -> page ports, sorted
	for _, pp := range pagePorts {
		if pp != mbdocs.DocPort {
			d := len(strconv.Itoa(pp))
			byDigits[d] = append(byDigits[d], pp)
		}
	}
	for _, group := range byDigits {
		free := make([]int, len(group))
		for i, pp := range group {
			free[i] = p.like(pp)
		}
		sort.Ints(free)
		for i, pp := range group {
			m[pp] = free[i]
		}
	}
	return m
}

func (p *ports) like(port int) int {
	if port >= 10000 {
		return gatewaytest.FreePortIn(p.t, 10000, 32767)
	}
	return gatewaytest.FreePortIn(p.t, 1024, 9999)
}
