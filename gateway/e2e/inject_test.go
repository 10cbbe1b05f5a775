package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

const counterInject = `function (config) {
	config.state.count = (config.state.count || 0) + 1;
	return { statusCode: 200, headers: {"Content-Type": "application/json"}, body: { count: config.state.count } };
}`

func TestInjectionIsOffWithoutTheFlag(t *testing.T) {
	rg := gatewaytest.Start(t)
	for _, imp := range []string{
		fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"inject":%q}]}]}`, counterInject),
		`{"protocol":"http","stubs":[{"predicates":[{"inject":"function(){return true}"}],"responses":[{"is":{}}]}]}`,
		`{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"decorate":"function(){}"}]}]}]}`,
		`{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"shellTransform":"cat"}]}]}]}`,
	} {
		status, body := rg.Do("POST", "/imposters", imp)
		if status != 400 || errorCode(t, body) != "invalid injection" {
			t.Errorf("%.60s: %d %s, want 400 invalid injection", imp, status, body)
		}
	}
}

func TestInjectStateIsTheFlow(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(fmt.Sprintf(`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}},
		"stubs":[{"responses":[{"inject":%q}]}]}`, counterInject))
	for i := 1; i <= 3; i++ {
		if _, body := flowGet(t, port, "alice", "/"); !strings.Contains(body, fmt.Sprintf(`"count": %d`, i)) {
			t.Fatalf("call %d: %s", i, body)
		}
	}
	if _, body := flowGet(t, port, "bob", "/"); !strings.Contains(body, `"count": 1`) {
		t.Fatalf("a second flow shares state: %s", body)
	}
	status, body := rg.Do("GET", fmt.Sprintf("/imposters/%d/flows/alice/count", port), nil)
	if status != 200 || !strings.Contains(string(body), `"value": "3"`) {
		t.Fatalf("the inject state is not the flow: %d %s", status, body)
	}
}

func TestHostileScriptsCostOneRequest(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/loop"}}],"responses":[{"inject":"function(){ while(true){} }"}]},
		{"predicates":[{"equals":{"path":"/throw"}}],"responses":[{"inject":"function(){ throw new Error('boom') }"}]},
		{"predicates":[{"equals":{"path":"/garbage"}}],"responses":[{"inject":"function(){ return 42 }"}]},
		{"predicates":[{"equals":{"path":"/ok"}}],"responses":[{"inject":"function(){ return {body: 'fine'} }"}]}]}`)
	for _, path := range []string{"/loop", "/throw", "/garbage"} {
		start := time.Now()
		status, body := flowGet(t, port, "", path)
		if status < 400 || !strings.Contains(body, "errors") {
			t.Errorf("%s answered %d %s, want an error in mb's shape", path, status, body)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s took %v", path, d)
		}
		if status, body := flowGet(t, port, "", "/ok"); status != 200 || body != "fine" {
			t.Fatalf("after %s a healthy script answered %d %q", path, status, body)
		}
	}
}

func TestPredicateInjectAndDecorate(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection")
	port := rg.PostImposter(`{"protocol":"http","stubs":[
		{"predicates":[{"inject":"function(config){ return config.request.path.indexOf('/vip') === 0 }"}],
		 "responses":[{"is":{"body":"vip"},"behaviors":[{"decorate":"function(config){ config.response.body += ' ' + config.request.method }"},
		 {"wait":"function(){ return 10 }"}]}]},
		{"responses":[{"is":{"body":"plain"}}]}]}`)
	if _, body := flowGet(t, port, "", "/vip/1"); body != "vip GET" {
		t.Fatalf("predicate inject + decorate: %q", body)
	}
	if _, body := flowGet(t, port, "", "/other"); body != "plain" {
		t.Fatalf("predicate inject let through: %q", body)
	}
}

// A request's flow budget (--flowBudget) bounds its wait for its flow's
// lock: behind a script that holds the flow longer than the budget, the
// next request on that flow answers 503 naming the deadline, within the
// budget, instead of queueing; other flows and the script itself go on.
func TestFlowBudgetBoundsTheWaitForAFlow(t *testing.T) {
	rg := gatewaytest.Start(t, "--allowInjection", "--flowBudget", "300")
	port := rg.PostImposter(`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}},"stubs":[
		{"predicates":[{"equals":{"path":"/slow"}}],"responses":[{"inject":"function (config) { var end = Date.now() + 800; while (Date.now() < end) {} config.state.n = (config.state.n || 0) + 1; return {body: 'slow ' + config.state.n}; }"}]},
		{"responses":[{"inject":"function (config) { config.state.n = (config.state.n || 0) + 1; return {body: 'fast ' + config.state.n}; }"}]}]}`)
	slow := make(chan string, 1)
	go func() {
		status, body := flowGet(t, port, "alice", "/slow")
		slow <- fmt.Sprint(status, " ", body)
	}()
	time.Sleep(150 * time.Millisecond) // the slow script holds alice's flow
	start := time.Now()
	status, body := flowGet(t, port, "alice", "/")
	waited := time.Since(start)
	if status != 503 || !strings.Contains(body, "(deadline)") {
		t.Errorf("behind a slow script: %d %s, want 503 naming the deadline", status, body)
	}
	if waited > 700*time.Millisecond {
		t.Errorf("the request waited %v, past its 300 ms budget", waited)
	}
	if status, body := flowGet(t, port, "bob", "/"); status != 200 || body != "fast 1" {
		t.Errorf("another flow meanwhile: %d %s", status, body)
	}
	if got := <-slow; got != "200 slow 1" {
		t.Errorf("the slow script: %s", got)
	}
	if status, body := flowGet(t, port, "alice", "/"); status != 200 || body != "fast 2" {
		t.Errorf("alice once the flow is free: %d %s", status, body)
	}
}
