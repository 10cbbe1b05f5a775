package e2e_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// rawGet sends a GET on a new connection and returns the raw response head
// and body as the server framed them.
func rawGet(t *testing.T, port int, path string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestIsResponses(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http",
		"defaultResponse":{"statusCode":404,"headers":{"X-Default":"yes"},"body":"nope"},
		"stubs":[
		{"predicates":[],"responses":[{"is":{}}]},
		{"responses":[{"is":{"statusCode":"202","headers":{"X-Multi":["a","b"],"Connection":"keep-alive","Content-Length":"999"},"body":{"k":[1,"two"]}}}]},
		{"responses":[{"is":{"_mode":"binary","body":"AAEC/w=="}}]}]}`)
	// The first stub matches everything: an empty `is` takes the defaults.
	resp, body := rawGet(t, port, "/")
	if resp.StatusCode != 404 || body != "nope" || resp.Header.Get("X-Default") != "yes" {
		t.Fatalf("defaults: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	if !resp.Close {
		t.Fatal("mb sends Connection: close unless the stub sets Connection")
	}
	rg.Do("DELETE", fmt.Sprintf("/imposters/%d/stubs/0", port), nil)

	resp, body = rawGet(t, port, "/")
	wantBody := "{\n    \"k\": [\n        1,\n        \"two\"\n    ]\n}"
	if resp.StatusCode != 202 || body != wantBody {
		t.Fatalf("object body: %d %q", resp.StatusCode, body)
	}
	if resp.ContentLength != int64(len(wantBody)) || resp.Close {
		t.Fatalf("Content-Length is recomputed and keep-alive honoured: len=%d close=%v", resp.ContentLength, resp.Close)
	}
	if got := resp.Header.Values("X-Multi"); strings.Join(got, ",") != "a,b" {
		t.Fatalf("multi-valued header = %v", got)
	}
	if resp.Header.Get("X-Default") != "" {
		t.Fatal("stub headers replace the default headers as a whole, as mb does")
	}
	rg.Do("DELETE", fmt.Sprintf("/imposters/%d/stubs/0", port), nil)

	_, body = rawGet(t, port, "/")
	if body != "\x00\x01\x02\xff" {
		t.Fatalf("binary body = %q", body)
	}
}

func TestRepeatCyclesResponses(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","stubs":[{"responses":[
		{"is":{"body":"1"},"repeat":2},{"is":{"body":"2"}},{"is":{"body":"3"},"_behaviors":{"repeat":"2"}}]}]}`)
	var got []string
	for i := 0; i < 7; i++ {
		_, body := rawGet(t, port, "/")
		got = append(got, body)
	}
	if strings.Join(got, "") != "1123311" {
		t.Fatalf("cycle = %v", got)
	}
}

func TestFaults(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
		{"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]}]}`)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /reset HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(c)
	c.Close()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset fault: read error %v, want ECONNRESET", err)
	}

	c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || len(got) == 0 || strings.HasPrefix(string(got), "HTTP/") {
		t.Fatalf("random data fault: %q %v", got, err)
	}
}

func TestHTTPSWithMutualAuth(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"https","mutualAuth":true,"recordRequests":true,
		"stubs":[{"responses":[{"is":{"body":"secure"}}]}]}`)
	_, body := rg.Do("GET", fmt.Sprintf("/imposters/%d", port), nil)
	imp := decode(t, body)
	if !strings.Contains(imp["cert"].(string), "BEGIN CERTIFICATE") || imp["mutualAuth"] != true {
		t.Fatalf("https metadata missing: %s", body)
	}
	var sawCertRequest bool
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			sawCertRequest = true
			return &tls.Certificate{}, nil
		},
	}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secure" || !sawCertRequest {
		t.Fatalf("https answered %q; client certificate requested: %v", b, sawCertRequest)
	}
}
