package message

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// An HTTP/2 request, as Go's server hands it over, fills the request an
// HTTP/1.1 client sending the same would: compared with FillFromFastHTTP
// on the HTTP/1.1 bytes.
func TestFillFromHTTPIsFastHTTPs(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(`{"a":1}`))
	_ = zw.Close()
	for _, tt := range []struct {
		name, method, target string
		header               http.Header
		body                 []byte
	}{
		{"query decoded", "GET", "/a%20b/c?x=1&y=h%C3%A9&x=2&flag#frag", http.Header{"Accept": {"*/*"}}, nil},
		{"no query", "DELETE", "/", nil, nil},
		{"repeated header", "GET", "/h", http.Header{"X-Many": {"1", "2"}, "User-Agent": {"curl/8"}}, nil},
		{"gzip body", "POST", "/z", http.Header{"Content-Encoding": {"gzip"}, "Content-Type": {"application/json"}}, zipped.Bytes()},
		{"broken gzip kept", "POST", "/z", http.Header{"Content-Encoding": {"gzip"}}, []byte("not gzip")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
			hr := &http.Request{Method: tt.method, RequestURI: tt.target, Host: "example:4545", Header: tt.header}
			if hr.Header == nil {
				hr.Header = http.Header{}
			}
			var got Request
			got.FillFromHTTP(hr, tt.body, addr)

			// The same request over HTTP/1.1, Host first and the rest
			// sorted, as FillFromHTTP promises.
			var raw strings.Builder
			raw.WriteString(tt.method + " " + tt.target + " HTTP/1.1\r\nHost: example:4545\r\n")
			for _, kv := range got.Headers[1:] {
				raw.WriteString(kv.Name + ": " + kv.Value + "\r\n")
			}
			if len(tt.body) > 0 && hr.Header.Get("Content-Length") == "" {
				raw.WriteString("Content-Length: " + strconv.Itoa(len(tt.body)) + "\r\n")
			}
			raw.WriteString("\r\n")
			raw.Write(tt.body)
			var ctx fasthttp.RequestCtx
			var freq fasthttp.Request
			freq.Header.DisableNormalizing()
			if err := freq.Read(bufio.NewReader(strings.NewReader(raw.String()))); err != nil {
				t.Fatal(err)
			}
			ctx.Init(&freq, addr, nil)
			var want Request
			want.FillFromFastHTTP(&ctx)

			if got.Method != want.Method || got.Target != want.Target || got.Path != want.Path ||
				!bytes.Equal(got.Body, want.Body) || got.RequestFrom() != want.RequestFrom() {
				t.Errorf("got %s %q %q %q %s, want %s %q %q %q %s", got.Method, got.Target, got.Path, got.Body, got.RequestFrom(),
					want.Method, want.Target, want.Path, want.Body, want.RequestFrom())
			}
			if kvs(got.Query) != kvs(want.Query) {
				t.Errorf("query %s, want %s", kvs(got.Query), kvs(want.Query))
			}
			wantHeaders := kvs(want.Headers)
			if len(tt.body) > 0 {
				wantHeaders = strings.Replace(wantHeaders, "Content-Length="+strconv.Itoa(len(tt.body))+";", "", 1)
			}
			if kvs(got.Headers) != wantHeaders {
				t.Errorf("headers %s, want %s", kvs(got.Headers), wantHeaders)
			}
			if got.Headers[0].Name != "Host" {
				t.Errorf("Host is not first: %s", kvs(got.Headers))
			}
		})
	}
}

func kvs(l []KV) string {
	var b strings.Builder
	for _, kv := range l {
		b.WriteString(kv.Name + "=" + kv.Value + ";")
	}
	return b.String()
}

// FuzzFillFromHTTP: whatever target and header Go's server lets through,
// the request has a path without its query or fragment, its query is what fasthttp decodes from the
// same target, and Host comes first.
func FuzzFillFromHTTP(f *testing.F) {
	f.Add("/a?b=c&d", "X-A", "v")
	f.Add("*", "", "")
	f.Add("/%zz?%zz=%", "Cookie", "a=b; c=d")
	f.Fuzz(func(t *testing.T, target, name, value string) {
		h := http.Header{}
		if name != "" {
			h[name] = []string{value}
		}
		var r Request
		r.FillFromHTTP(&http.Request{Method: "GET", RequestURI: target, Host: "h", Header: h}, nil, nil)
		if r.Path == "" || strings.ContainsAny(r.Path, "?#") {
			t.Fatalf("path %q of %q", r.Path, target)
		}
		if len(r.Headers) == 0 || r.Headers[0].Name != "Host" {
			t.Fatalf("headers %v", r.Headers)
		}
		var u fasthttp.URI
		u.SetQueryString(queryOf(target))
		n := 0
		for range u.QueryArgs().All() {
			n++
		}
		if n != len(r.Query) {
			t.Fatalf("%d query args, fasthttp has %d, of %q", len(r.Query), n, target)
		}
	})
}
