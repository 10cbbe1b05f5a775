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

	"github.com/riftgate/riftgate/gateway/message"
)

// adminTimeout bounds one save/replay request to a running instance: the
// GET of 100,000 recorded stubs takes tens of seconds on a busy machine.
const adminTimeout = 5 * time.Minute

// replayPartBytes is the largest body replay sends at once: half the admin
// API's cap (16 MiB), so that what a part's JSON becomes in a command fits
// the configuration log's cap (24 MiB) with room.
const replayPartBytes = 8 << 20

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
	if len(body) <= replayPartBytes {
		_, err = c.do(ctx, http.MethodPut, "/imposters", body)
	} else {
		err = replayInParts(ctx, c, body, replayPartBytes)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// replayInParts PUTs a configuration larger than one admin body can hold
// (a recording of 100,000 exchanges saves to ~79 MB): /imposters gets
// every imposter with as many of its first stubs as fit part bytes, and
// the rest follow, in order, in POST /imposters/:id/stubs bodies of
// riftgate's {"stubs": [...]} form of at most part bytes each. Unlike the
// single PUT it is not atomic: a part that fails leaves the imposters
// with the stubs sent before it, and the error says which.
func replayInParts(ctx context.Context, c *adminClient, body []byte, part int) error {
	var all struct {
		Imposters []json.RawMessage `json:"imposters"`
	}
	if err := json.Unmarshal(body, &all); err != nil {
		return fmt.Errorf("replay: the imposters are not JSON: %w", err)
	}
	type rest struct {
		port  int
		stubs []json.RawMessage
	}
	var put []json.RawMessage
	var later []rest
	size := len(`{"imposters":[]}`)
	for _, raw := range all.Imposters {
		header, stubs, err := cutStubs(raw)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		var id struct {
			Port int `json:"port"`
		}
		if err := json.Unmarshal(header, &id); err != nil || id.Port == 0 {
			return fmt.Errorf("replay: an imposter without a port")
		}
		size += len(header) + len(`,"stubs":[]`) + 1
		n := 0
		for n < len(stubs) && size+len(stubs[n])+1 <= part {
			size += len(stubs[n]) + 1
			n++
		}
		put = append(put, json.RawMessage(message.WithArray(header, "stubs", stubs[:n])))
		if n < len(stubs) {
			later = append(later, rest{id.Port, stubs[n:]})
		}
	}
	putBody, err := json.Marshal(map[string][]json.RawMessage{"imposters": put})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if _, err := c.do(ctx, http.MethodPut, "/imposters", putBody); err != nil {
		return err
	}
	for _, r := range later {
		for sent := 0; sent < len(r.stubs); {
			n, size := 0, len(`{"stubs":[]}`)
			for sent+n < len(r.stubs) && (n == 0 || size+len(r.stubs[sent+n])+1 <= part) {
				size += len(r.stubs[sent+n]) + 1
				n++
			}
			b, err := json.Marshal(map[string][]json.RawMessage{"stubs": r.stubs[sent : sent+n]})
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			if _, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/imposters/%d/stubs", r.port), b); err != nil {
				return fmt.Errorf("replay: the imposter on port %d got %d of its stubs, then: %w", r.port, sent, err)
			}
			sent += n
		}
	}
	return nil
}

// cutStubs splits an imposter's JSON into the object without its "stubs"
// (its other fields in their order) and the stubs.
func cutStubs(raw json.RawMessage) (header []byte, stubs []json.RawMessage, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("an imposter is not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if key == "stubs" {
			if err := json.Unmarshal(v, &stubs); err != nil {
				return nil, nil, fmt.Errorf("an imposter's stubs are not a list: %w", err)
			}
			continue
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes(), stubs, nil
}
