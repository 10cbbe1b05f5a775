package predicate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/predicate/mbtest"
)

// TestAgainstMountebank checks every row of the table against the real
// Mountebank 2.9.1, so the table's answers are mb's, not ours.
func TestAgainstMountebank(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test against mb skipped in -short mode")
	}
	mb, err := mbtest.Start(context.Background(), "../..")
	if errors.Is(err, mbtest.ErrNotInstalled) {
		t.Skip("Mountebank is not installed under build/node (make mb)")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Stop()
	for _, c := range table {
		port, err := mb.Imposter("[" + mbtest.Stub("["+c.pred+"]", map[string]any{"is": map[string]any{"body": "match"}}) + "]")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		target := c.req.path
		if target == "" {
			target = "/"
		}
		if c.req.query != "" {
			target += "?" + c.req.query
		}
		method := c.req.method
		if method == "" {
			method = "GET"
		}
		var hs [][2]string
		for _, kv := range c.req.wireHeaders() {
			hs = append(hs, [2]string{kv.Name, kv.Value})
		}
		_, body, err := mb.Send(port, method, target, hs, c.req.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.TrimSpace(string(body)) == "match"; got != c.want {
			t.Errorf("%s: mb says %v, table says %v (body %q)", c.name, got, c.want, body)
		}
		if err := mb.Delete(port); err != nil {
			t.Fatal(err)
		}
	}
}
