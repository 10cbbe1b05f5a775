package ui_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// TestImposterPageShowsManyStubsAPageAtATime gives an imposter 3,000
// stubs: its page asks the admin API for one window of them at a time
// (stubOffset, stubLimit) rather than the whole imposter, and pages on
// through them; the window's answer says where it is in how many.
func TestImposterPageShowsManyStubsAPageAtATime(t *testing.T) {
	const n = 3000
	rg := gatewaytest.Start(t)
	stubs := make([]any, n)
	for i := range stubs {
		stubs[i] = map[string]any{
			"predicates": []any{map[string]any{"equals": map[string]any{"path": fmt.Sprintf("/s/%d", i)}}},
			"responses":  []any{map[string]any{"is": map[string]any{"body": fmt.Sprintf("stub %d", i)}}},
		}
	}
	port := rg.PostImposter(map[string]any{"protocol": "http", "stubs": stubs})

	status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d?replayable=true&stubOffset=2990&stubLimit=20", port), nil)
	var win struct {
		Stubs []struct {
			Predicates []struct {
				Equals struct{ Path string } `json:"equals"`
			} `json:"predicates"`
		} `json:"stubs"`
		Window struct{ Offset, Limit, Total int } `json:"_stubWindow"`
	}
	if err := json.Unmarshal(body, &win); status != 200 || err != nil {
		t.Fatalf("a window of the stubs: %d %v %.300s", status, err, body)
	}
	if len(win.Stubs) != 10 || win.Stubs[0].Predicates[0].Equals.Path != "/s/2990" || win.Window.Offset != 2990 || win.Window.Limit != 10 || win.Window.Total != n {
		t.Fatalf("the window past the end: %d stubs from %+v, window %+v", len(win.Stubs), win.Stubs[0], win.Window)
	}
	// Without the parameters the answer is mb's: every stub, no window.
	_, all := rg.Do("GET", fmt.Sprintf("/imposters/%d?replayable=true", port), nil)
	if strings.Contains(string(all), "_stubWindow") || strings.Count(string(all), `"predicates"`) != n {
		t.Fatalf("GET without a window: %d stubs, window field %v", strings.Count(string(all), `"predicates"`), strings.Contains(string(all), "_stubWindow"))
	}

	p := browser(t)
	p.open(fmt.Sprintf("%s/imposters/%d", rg.URL, port))
	p.wait("the first page of stubs", `document.querySelectorAll("#stubs li.stub").length === 20`)
	if got := eval[string](p, `document.querySelector("#stubs h2").textContent`); got != fmt.Sprintf("Stubs (%d)", n) {
		t.Errorf("stubs heading %q", got)
	}
	eval[bool](p, `document.querySelector("#stubs .pager .next").click(), true`)
	p.wait("the second page of stubs", `document.querySelector("#stubs .range").textContent === "21–40 of 3000"`)
	if got := eval[string](p, `document.querySelector("#stubs li.stub").innerText`); !strings.Contains(got, `"/s/20"`) {
		t.Errorf("the second page starts with\n%s\nwant stub 20", got)
	}
	// Each page came as a window: the page never asked for every stub.
	asked := eval[[]string](p, fmt.Sprintf(`performance.getEntriesByType("resource").map(e => e.name).filter(u => u.includes("/imposters/%d?"))`, port))
	windows := 0
	for _, u := range asked {
		if !strings.Contains(u, "stubLimit=") {
			t.Errorf("the page asked for %s, every stub", u)
		}
		windows++
	}
	if windows < 2 {
		t.Errorf("the page asked for %v: want a window per page", asked)
	}
}
