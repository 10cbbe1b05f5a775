// Package mbtest starts the real Mountebank 2.9.1 (installed by the Makefile
// under build/node) for differential tests, and asks it whether a stub
// matches or what it answers.
package mbtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNotInstalled means build/node has no Mountebank.
var ErrNotInstalled = errors.New("mountebank is not installed under build/node")

// MB is a running Mountebank.
type MB struct {
	cmd     *exec.Cmd
	port    int
	pidfile string
	done    chan struct{}
}

// Start starts mb on a free 127.0.0.1 port: $RIFTGATE_MB (the Makefile
// sets it), else build/node under root, the repository root. allowInjection
// is mb's --allowInjection.
func Start(ctx context.Context, root string, allowInjection bool) (*MB, error) {
	bin := os.Getenv("RIFTGATE_MB")
	if bin == "" {
		bin = filepath.Join(root, "build", "node", "node_modules", ".bin", "mb")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, ErrNotInstalled
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	pid := filepath.Join(os.TempDir(), fmt.Sprintf("riftgate-mbtest-%d.pid", port))
	args := []string{"start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", pid}
	if allowInjection {
		args = append(args, "--allowInjection")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = os.TempDir()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mb: %w", err)
	}
	m := &MB{cmd: cmd, port: port, pidfile: pid, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", m.addr(port)); err == nil {
			_ = c.Close()
			return m, nil
		}
		select {
		case <-ctx.Done():
			m.Stop()
			return nil, ctx.Err()
		case <-m.done:
			return nil, errors.New("mb exited during startup")
		case <-time.After(100 * time.Millisecond):
		}
	}
	m.Stop()
	return nil, errors.New("mb did not start within 30s")
}

func (m *MB) addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// Stop kills mb, waits for it and removes its pidfile.
func (m *MB) Stop() {
	_ = m.cmd.Process.Kill()
	<-m.done
	_ = os.Remove(m.pidfile)
}

// FreePort returns a port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Imposter creates an imposter from stubs JSON on a free port and returns
// the port; the error is mb's answer when it refuses.
func (m *MB) Imposter(stubs string) (int, error) {
	port, err := FreePort()
	if err != nil {
		return 0, err
	}
	body := fmt.Sprintf(`{"port":%d,"protocol":"http","stubs":%s}`, port, stubs)
	resp, err := http.Post("http://"+m.addr(m.port)+"/imposters", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		refused := &RefusedError{Status: resp.StatusCode, Body: string(b)}
		_ = json.Unmarshal(b, refused)
		return 0, refused
	}
	return port, nil
}

// RefusedError is mb's answer to an imposter it refuses.
type RefusedError struct {
	Status int
	Body   string
	Errors []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("mb refused the imposter (%d): %s", e.Status, e.Body)
}

// Has reports whether mb gave an error with code and message.
func (e *RefusedError) Has(code, message string) bool {
	for _, x := range e.Errors {
		if x.Code == code && x.Message == message {
			return true
		}
	}
	return false
}

// Delete removes the imposter on port.
func (m *MB) Delete(port int) error {
	rq, _ := http.NewRequest(http.MethodDelete, "http://"+m.addr(m.port)+"/imposters/"+strconv.Itoa(port), nil)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Send writes a raw request (method, target, headers in order, body) to the
// imposter on port and returns the response.
func (m *MB) Send(port int, method, target string, headers [][2]string, body string) (*http.Response, []byte, error) {
	c, err := net.DialTimeout("tcp", m.addr(port), 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	for _, h := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := c.Write(b.Bytes()); err != nil {
		return nil, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp, rb, err
}

// Stub renders one stub with predicates (a JSON array) answering body.
func Stub(predicates string, response any) string {
	r, _ := json.Marshal(response)
	if predicates == "" {
		return fmt.Sprintf(`{"responses":[%s]}`, r)
	}
	return fmt.Sprintf(`{"predicates":%s,"responses":[%s]}`, predicates, r)
}
