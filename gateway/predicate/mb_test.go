package predicate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/predicate/mbtest"
	"pgregory.net/rapid"
)

// TestAgainstMountebank checks every row of the table, then random
// predicates and requests, against the real Mountebank 2.9.1.
func TestAgainstMountebank(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test against mb skipped in -short mode")
	}
	mb, err := mbtest.Start(context.Background(), "../..", false)
	if errors.Is(err, mbtest.ErrNotInstalled) {
		t.Fatal("Mountebank is not installed under build/node: run `make node`")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Stop()
	t.Run("table", func(t *testing.T) {
		for _, c := range table {
			if got, ok := mbMatches(t, mb, c.pred, c.req); !ok || got != c.want {
				t.Errorf("%s: mb says %v, table says %v", c.name, got, c.want)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, c := range compileErrors {
			if !c.mb {
				continue
			}
			_, err := mb.Imposter("[" + mbtest.Stub("["+c.pred+"]", map[string]any{"is": map[string]any{}}) + "]")
			var refused *mbtest.RefusedError
			if !errors.As(err, &refused) || !refused.Has(c.code, c.msg) {
				t.Errorf("%s: mb answered %v, table says %s: %s", c.pred, err, c.code, c.msg)
			}
		}
	})
	t.Run("xpath", func(t *testing.T) {
		// An xpath on XML that is often malformed, which mb's DOM parser
		// recovers from in its own ways.
		rapid.Check(t, func(rt *rapid.T) {
			src := genXPathLeaf(rt)
			r := req{method: "POST", path: "/", body: genXMLBody.Draw(rt, "body")}
			p, err := Compile(json.RawMessage(src), Options{})
			if err != nil {
				rt.Fatal(err)
			}
			want, ok := mbMatches(t, mb, src, r)
			if !ok {
				return // as in random, below
			}
			if got := p.Match(r.message()); got != want {
				rt.Fatalf("%s on %q: riftgate %v, mb %v", src, r.body, got, want)
			}
		})
	})
	t.Run("random", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			src := genPred(rt, 1)
			r := genReq(rt)
			p, err := Compile(json.RawMessage(src), Options{})
			if err != nil {
				rt.Fatal(err)
			}
			want, ok := mbMatches(t, mb, src, r)
			if !ok {
				// mb's dry run threw a JavaScript error (contains on a
				// number that xpath count() selected, say); riftgate
				// compares the number's text instead.
				return
			}
			if got := p.Match(r.message()); got != want {
				rt.Fatalf("%s on %+v: riftgate %v, mb %v", src, r, got, want)
			}
		})
	})
}

// mbMatches asks mb whether a stub with pred matches r; ok is false when mb
// fails with a JavaScript exception (an error without a code) while
// validating the predicate or matching the request.
func mbMatches(t testing.TB, mb *mbtest.MB, pred string, r req) (match, ok bool) {
	port, err := mb.Imposter("[" + mbtest.Stub("["+pred+"]", map[string]any{"is": map[string]any{"body": "match"}}) + "]")
	var refused *mbtest.RefusedError
	if errors.As(err, &refused) && len(refused.Errors) > 0 && refused.Errors[0].Code == "" {
		return false, false
	}
	if err != nil {
		t.Fatalf("%s: %v", pred, err)
	}
	defer func() {
		if err := mb.Delete(port); err != nil {
			t.Fatal(err)
		}
	}()
	target := r.path
	if target == "" {
		target = "/"
	}
	if r.query != "" {
		target += "?" + r.query
	}
	method := r.method
	if method == "" {
		method = "GET"
	}
	var hs [][2]string
	for _, kv := range r.wireHeaders() {
		hs = append(hs, [2]string{kv.Name, kv.Value})
	}
	resp, body, err := mb.Send(port, method, target, hs, r.body)
	if err != nil {
		t.Fatalf("%s: %v", pred, err)
	}
	if resp.StatusCode != 200 {
		return false, false // the JavaScript error happened at request time
	}
	return strings.TrimSpace(string(body)) == "match", true
}
