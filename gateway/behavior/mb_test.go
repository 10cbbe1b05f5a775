package behavior

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/riftgate/riftgate/gateway/predicate/mbtest"
	"pgregory.net/rapid"
)

// TestAgainstMountebank checks the table's answers and the validation
// errors against the real Mountebank 2.9.1.
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
	for _, c := range table(writeCSV(t)) {
		port, err := mb.Imposter(fmt.Sprintf(`[{"responses":[%s]}]`, c.response))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m, target, hs := c.req.wire()
		resp, body, err := mb.Send(port, m, target, hs, c.req.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.StatusCode != c.want.status {
			t.Errorf("%s: mb status %d, table %d", c.name, resp.StatusCode, c.want.status)
		}
		for _, h := range c.want.headers {
			if got := resp.Header.Values(h[0]); len(got) != 1 || got[0] != h[1] {
				t.Errorf("%s: mb header %s %q, table %q", c.name, h[0], got, h[1])
			}
		}
		if string(body) != c.want.body {
			t.Errorf("%s: mb body %q, table %q", c.name, body, c.want.body)
		}
		if err := mb.Delete(port); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		src, r := genCopy(rt), genReq(rt)
		b, err := Compile(json.RawMessage(src), Options{})
		if err != nil {
			rt.Fatal(err)
		}
		resp := render(rt, src)
		if err := b.Apply(context.Background(), r.message(), resp); err != nil {
			rt.Fatal(err)
		}
		port, err := mb.Imposter(fmt.Sprintf(`[{"responses":[%s]}]`, src))
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = mb.Delete(port) }()
		m, target, hs := r.wire()
		mresp, body, err := mb.Send(port, m, target, hs, r.body)
		if err != nil {
			rt.Fatal(err)
		}
		if mresp.StatusCode != 200 {
			return // a JavaScript error in mb (a regex run on the query object, say)
		}
		out, _ := resp.Header("X-Out")
		if string(body) != string(resp.Body) || mresp.Header.Get("X-Out") != out {
			rt.Fatalf("%s on %+v: riftgate %q / %q, mb %q / %q", src, r, resp.Body, out, body, mresp.Header.Get("X-Out"))
		}
	})
	csvDir := writeCSV(t)
	rapid.Check(t, func(rt *rapid.T) {
		src, r := genLookup(rt, filepath.Join(csvDir, "people.csv")), genKeyReq(rt)
		b, err := Compile(json.RawMessage(src), Options{})
		if err != nil {
			rt.Fatal(err)
		}
		resp := render(rt, src)
		if err := b.Apply(context.Background(), r.message(), resp); err != nil {
			rt.Fatal(err)
		}
		port, err := mb.Imposter(fmt.Sprintf(`[{"responses":[%s]}]`, src))
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = mb.Delete(port) }()
		m, target, hs := r.wire()
		mresp, body, err := mb.Send(port, m, target, hs, r.body)
		if err != nil {
			rt.Fatal(err)
		}
		if mresp.StatusCode == 200 && string(body) != string(resp.Body) {
			rt.Fatalf("%s on %+v: riftgate %q, mb %q", src, r, resp.Body, body)
		}
	})
	for _, c := range errorTable {
		_, err := mb.Imposter(fmt.Sprintf(`[{"responses":[%s]}]`, c.response))
		var refused *mbtest.RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("%s: mb answered %v", c.response, err)
			continue
		}
		if !refused.Has(c.code, c.msg) {
			t.Errorf("%s: mb answered %s, table says %s: %s", c.response, refused.Body, c.code, c.msg)
		}
	}
}
