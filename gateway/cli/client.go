package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
)

// adminTimeout bounds one save/replay request to a running instance.
const adminTimeout = 30 * time.Second

// adminClient talks to a running riftgate (or mb) admin API, as mb's save
// and replay do.
type adminClient struct {
	base   string
	apiKey string
	http   *http.Client
}

func newAdminClient(s *settings) *adminClient {
	host := net.JoinHostPort(hostOrLocalhost(s.str("host")), strconv.Itoa(s.integer("port")))
	return &adminClient{
		base:   "http://" + host,
		apiKey: s.str("apikey"),
		http:   &http.Client{Timeout: adminTimeout, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

func (c *adminClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("x-api-key", c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			//lint:ignore ST1005 mb's wording, shown to users as is
			return nil, fmt.Errorf("No riftgate process running on %s", c.base)
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		// mb prints the status and the body.
		return nil, fmt.Errorf("%d\n%s", resp.StatusCode, respBody)
	}
	if !json.Valid(respBody) {
		return nil, fmt.Errorf("%s %s: response is not JSON", method, path)
	}
	return respBody, nil
}

// getImposters is GET /imposters?replayable=true[&removeProxies=true].
func (c *adminClient) getImposters(ctx context.Context, removeProxies bool) ([]byte, error) {
	path := "/imposters?replayable=true"
	if removeProxies {
		path += "&removeProxies=true"
	}
	return c.do(ctx, http.MethodGet, path, nil)
}

// save is `mb save`: the running configuration, replayable, written to
// --savefile as JSON indented by two spaces (mb's JSON.stringify(x, null, 2)).
func save(ctx context.Context, s *settings, stderr io.Writer) int {
	body, err := newAdminClient(s).getImposters(ctx, s.boolean("removeProxies"))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if s.customFormatter() {
		// mb's save hands the imposters to the formatter, which writes them.
		if _, err := runFormatter(ctx, s, "save", stderr, s.formatterOptions(), json.RawMessage(body)); err != nil {
			fmt.Fprintf(stderr, "formatter %s: %v\n", s.str("formatter"), err)
			return 1
		}
		return 0
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		fmt.Fprintf(stderr, "indent imposters: %v\n", err)
		return 1
	}
	if err := os.WriteFile(s.str("savefile"), out.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "write savefile: %v\n", err)
		return 1
	}
	return 0
}

// replay is `mb replay`: the configuration with proxies removed (so every
// recorded response becomes an `is`) PUT back in place.
func replay(ctx context.Context, s *settings, stderr io.Writer) int {
	c := newAdminClient(s)
	body, err := c.getImposters(ctx, true)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if _, err := c.do(ctx, http.MethodPut, "/imposters", body); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
