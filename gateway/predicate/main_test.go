package predicate

import (
	"encoding/json"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func benchMatch(b *testing.B, pred string, r *message.Request) {
	p, err := Compile(json.RawMessage(pred), Options{})
	if err != nil {
		b.Fatal(err)
	}
	if !p.Match(r) {
		b.Fatalf("%s does not match", pred)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.Match(r)
	}
}

func benchReq() *message.Request {
	return &message.Request{
		Method:  "POST",
		Path:    "/api/v1/orders/12345",
		Query:   message.ParseQuery("page=2&sort=desc"),
		Headers: []message.KV{{Name: "Host", Value: "localhost"}, {Name: "Content-Type", Value: "application/json"}, {Name: "X-Request-Id", Value: "abc-123"}},
		Body:    []byte(`{"order":{"id":12345,"items":[{"sku":"A1","qty":2}]},"customer":"Bob"}`),
	}
}

func BenchmarkEqualsPath(b *testing.B) {
	benchMatch(b, `{"equals":{"path":"/API/v1/orders/12345"}}`, benchReq())
}

func BenchmarkEqualsPathCaseSensitive(b *testing.B) {
	benchMatch(b, `{"equals":{"path":"/api/v1/orders/12345"},"caseSensitive":true}`, benchReq())
}

func BenchmarkEqualsMethodPathQueryHeader(b *testing.B) {
	benchMatch(b, `{"equals":{"method":"post","path":"/api/v1/orders/12345","query":{"page":"2"},"headers":{"content-type":"application/json"}}}`, benchReq())
}

func BenchmarkContainsBody(b *testing.B) {
	benchMatch(b, `{"contains":{"body":"customer"}}`, benchReq())
}

func BenchmarkStartsWithPath(b *testing.B) {
	benchMatch(b, `{"startsWith":{"path":"/api/v1"}}`, benchReq())
}

func BenchmarkMatchesPath(b *testing.B) {
	benchMatch(b, `{"matches":{"path":"^/api/v\\d+/orders/\\d+$"}}`, benchReq())
}

func BenchmarkExistsHeader(b *testing.B) {
	benchMatch(b, `{"exists":{"headers":{"x-request-id":true}}}`, benchReq())
}

func BenchmarkEqualsJSONBody(b *testing.B) {
	benchMatch(b, `{"equals":{"body":{"customer":"bob"}}}`, benchReq())
}

func BenchmarkJSONPathBody(b *testing.B) {
	benchMatch(b, `{"equals":{"body":"a1"},"jsonpath":{"selector":"$.order.items[0].sku"}}`, benchReq())
}

// TestZeroAlloc pins the allocation-free common cases, so a regression
// fails the tests and not only the benchmark numbers.
func TestZeroAlloc(t *testing.T) {
	for _, pred := range []string{
		`{"equals":{"path":"/API/v1/orders/12345"}}`,
		`{"equals":{"method":"post","path":"/api/v1/orders/12345","query":{"page":"2"},"headers":{"content-type":"application/json"}}}`,
		`{"contains":{"body":"CUSTOMER"}}`,
		`{"startsWith":{"path":"/api"}}`,
		`{"endsWith":{"path":"345"}}`,
		`{"matches":{"path":"^/api/v\\d+/orders/\\d+$"}}`,
		`{"exists":{"headers":{"x-request-id":true},"query":{"nope":false}}}`,
		// JSON bodies: parsed once per request (the first Match below),
		// then matched without allocating.
		`{"equals":{"body":{"CUSTOMER":"bob","order":{"items":{"sku":"a1"}}}}}`,
		`{"contains":{"body":{"customer":"O"}}}`,
	} {
		p, err := Compile(json.RawMessage(pred), Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := benchReq()
		if !p.Match(r) {
			t.Fatalf("%s does not match", pred)
		}
		if n := testing.AllocsPerRun(100, func() { p.Match(r) }); n != 0 {
			t.Errorf("%s: %v allocations per match", pred, n)
		}
	}
}
