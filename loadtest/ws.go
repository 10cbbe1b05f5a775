package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 6455 §4.2.2 names SHA-1
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// WSExchange makes each request of a run a WebSocket round trip: every
// virtual user keeps one connection to Path (the opening handshake made
// once, when it connects), sends Send as one text message (binary with
// Binary), and reads the next message back, which must equal Expect when
// Expect is set. Pings from the server are answered and not counted.
// Targets are then ws://host:port or wss://host:port.
type WSExchange struct {
	Path   string
	Send   []byte
	Binary bool
	Expect []byte // nil: any message is the answer
}

// The ways an exchange fails.
var (
	errWSAnswer    = errors.New("websocket: unexpected answer")
	errWSClosed    = errors.New("websocket: closed by the server")
	errWSHandshake = errors.New("websocket: handshake refused")
	errWSProtocol  = errors.New("websocket: protocol error")
)

// wsKey is the Sec-WebSocket-Key every connection sends: a load generator
// needs no fresh nonce (RFC 6455 asks for one against caches in the way,
// which a load test does not have), and a fixed one lets the answer be
// checked against one precomputed value.
const wsKey = "cmlmdGxvYWQtd2Vic29jaw=="

var wsAccept = func() string {
	h := sha1.New() //nolint:gosec // RFC 6455 §4.2.2
	h.Write([]byte(wsKey + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}()

// maxWSAnswer bounds an answer a worker reads.
const maxWSAnswer = 64 << 20

// doWS runs one exchange on the worker's connection to target t, making
// the connection (and its handshake) first if it has none.
func (w *worker) doWS(ctx context.Context, t int, x *WSExchange) error {
	cn, err := w.connectWS(ctx, t, x)
	if err != nil {
		return err
	}
	if w.wsFrame == nil {
		w.wsFrame = wsClientFrame(x)
	}
	if _, err = cn.bw.Write(w.wsFrame); err == nil {
		err = cn.bw.Flush()
	}
	var got []byte
	if err == nil {
		got, err = w.readWSMessage(cn)
	}
	if err == nil && x.Expect != nil && !bytes.Equal(got, x.Expect) {
		err = fmt.Errorf("%w %q", errWSAnswer, truncate(got))
	}
	if err != nil || w.r.opts.NoKeepAlive {
		cn.close()
	}
	return err
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// connectWS returns the worker's connection to target t with its
// handshake made.
func (w *worker) connectWS(ctx context.Context, t int, x *WSExchange) (*conn, error) {
	cn, err := w.connect(ctx, t)
	if err != nil {
		return nil, err
	}
	if cn.ws {
		return cn, nil
	}
	tg := &w.r.targets[t]
	path := x.Path
	if path == "" {
		path = "/"
	}
	fmt.Fprintf(cn.bw, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, tg.host, wsKey)
	if err := cn.bw.Flush(); err != nil {
		cn.close()
		return nil, err
	}
	if err := readWSAccept(cn.br); err != nil {
		cn.close()
		return nil, err
	}
	cn.ws = true
	return cn, nil
}

// readWSAccept reads the answer to the handshake: a 101 with the right
// Sec-WebSocket-Accept.
func readWSAccept(br *bufio.Reader) error {
	status, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if f := strings.Fields(status); len(f) < 2 || f[1] != "101" {
		return fmt.Errorf("%w: %s", errWSHandshake, strings.TrimSpace(status))
	}
	accepted := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Sec-WebSocket-Accept") {
			accepted = strings.TrimSpace(value) == wsAccept
		}
	}
	if !accepted {
		return fmt.Errorf("%w: no or a wrong Sec-WebSocket-Accept", errWSHandshake)
	}
	return nil
}

// wsClientFrame renders the message a worker sends, masked (as a client's
// must be) with a key of its own, once.
func wsClientFrame(x *WSExchange) []byte {
	op := byte(0x1)
	if x.Binary {
		op = 0x2
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	return appendWSFrame(nil, op, x.Send, mask)
}

func appendWSFrame(dst []byte, op byte, payload []byte, mask [4]byte) []byte {
	n := len(payload)
	dst = append(dst, 0x80|op)
	switch {
	case n < 126:
		dst = append(dst, 0x80|byte(n))
	case n < 1<<16:
		dst = append(dst, 0x80|126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	dst = append(dst, mask[:]...)
	for i, c := range payload {
		dst = append(dst, c^mask[i&3])
	}
	return dst
}

// readWSMessage reads the next data message (its fragments joined) into
// the worker's buffer, answering pings and skipping pongs.
func (w *worker) readWSMessage(cn *conn) ([]byte, error) {
	msg := w.buf[:0]
	hdr := w.wsHdr[:] // the worker's: a local array read through io.Reader escapes
	for {
		if _, err := io.ReadFull(cn.br, hdr[:2]); err != nil {
			return nil, err
		}
		fin, op := hdr[0]&0x80 != 0, hdr[0]&0x0F
		if hdr[1]&0x80 != 0 {
			return nil, fmt.Errorf("%w: a masked server frame", errWSProtocol)
		}
		n := uint64(hdr[1] & 0x7F)
		switch n {
		case 126:
			if _, err := io.ReadFull(cn.br, hdr[:2]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(hdr[:2]))
		case 127:
			if _, err := io.ReadFull(cn.br, hdr[:8]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(hdr[:8])
		}
		if n > maxWSAnswer || uint64(len(msg))+n > maxWSAnswer {
			return nil, fmt.Errorf("%w: a message over %d bytes", errWSProtocol, maxWSAnswer)
		}
		start := len(msg)
		if need := start + int(n); need > cap(msg) {
			grown := make([]byte, start, max(need, 2*cap(msg), 512))
			copy(grown, msg)
			msg = grown
		}
		msg = msg[:start+int(n)]
		if _, err := io.ReadFull(cn.br, msg[start:]); err != nil {
			return nil, err
		}
		switch op {
		case 0x8:
			code := 1005
			if n >= 2 {
				code = int(binary.BigEndian.Uint16(msg[start:]))
			}
			return nil, fmt.Errorf("%w (%d %q)", errWSClosed, code, msg[start+min(int(n), 2):])
		case 0x9:
			var mask [4]byte
			_, _ = rand.Read(mask[:])
			if _, err := cn.bw.Write(appendWSFrame(nil, 0xA, msg[start:], mask)); err != nil {
				return nil, err
			}
			if err := cn.bw.Flush(); err != nil {
				return nil, err
			}
			msg = msg[:start]
			continue
		case 0xA:
			msg = msg[:start]
			continue
		}
		if fin {
			w.buf = msg
			return msg, nil
		}
	}
}

// ServeWSEcho serves a raw Go WebSocket echo server on ln until ctx is
// cancelled: every message is sent back as it came, the upper bound a Go
// WebSocket imposter can reach here. It is gorilla/websocket on net/http,
// the usual way to write one in Go.
func ServeWSEcho(ctx context.Context, ln net.Listener) error {
	up := &websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(rw, r, nil)
			if err != nil {
				return
			}
			nc := c.NetConn()
			mu.Lock()
			open[nc] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			defer func() {
				mu.Lock()
				delete(open, nc)
				mu.Unlock()
				c.Close()
				wg.Done()
			}()
			for {
				typ, p, err := c.ReadMessage()
				if err != nil {
					return
				}
				if err := c.WriteMessage(typ, p); err != nil {
					return
				}
			}
		}),
	}
	stop := context.AfterFunc(ctx, func() {
		_ = srv.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	err := srv.Serve(ln)
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("websocket echo server: %w", err)
}

// probeWS checks that target (ws://host:port) answers x.
func probeWS(target string, x *WSExchange) error {
	addr := strings.TrimPrefix(target, "ws://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	cn := &conn{c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}
	w := &worker{}
	path := x.Path
	if path == "" {
		path = "/"
	}
	fmt.Fprintf(cn.bw, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr, wsKey)
	if err := cn.bw.Flush(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := readWSAccept(cn.br); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if _, err := cn.bw.Write(wsClientFrame(x)); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := cn.bw.Flush(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	got, err := w.readWSMessage(cn)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if x.Expect != nil && !bytes.Equal(got, x.Expect) {
		return fmt.Errorf("probe: answer %q, want %q", got, x.Expect)
	}
	return nil
}
