package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCPExchange makes each request of a run a raw tcp exchange instead of an
// http one: Send is written on the virtual user's connection and exactly
// len(Expect) bytes are read back and compared. Targets are then
// tcp://host:port.
type TCPExchange struct {
	Send, Expect []byte
}

// errTCPAnswer is a tcp answer that differs from the expected bytes.
var errTCPAnswer = errors.New("tcp: unexpected answer")

// doTCP runs one exchange on the worker's connection to target t.
func (w *worker) doTCP(ctx context.Context, t int, x *TCPExchange) error {
	cn, err := w.connect(ctx, t)
	if err != nil {
		return err
	}
	if cap(w.buf) < len(x.Expect) {
		w.buf = make([]byte, len(x.Expect))
	}
	got := w.buf[:len(x.Expect)]
	if _, err = cn.c.Write(x.Send); err == nil {
		_, err = io.ReadFull(cn.br, got)
	}
	if err == nil && !bytes.Equal(got, x.Expect) {
		err = fmt.Errorf("%w %q", errTCPAnswer, got)
	}
	if err != nil || w.r.opts.NoKeepAlive {
		cn.close()
	}
	return err
}

// tcpHelloAnswer is what the raw tcp server answers to every read: the
// static stub a tcp case posts answers the same.
var tcpHelloAnswer = []byte("PONG")

// ServeTCPHello serves the raw Go tcp server on ln until ctx is cancelled:
// every read is answered with tcpHelloAnswer, the upper bound a Go tcp
// imposter can reach here.
func ServeTCPHello(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("tcp hello server: %w", err)
		}
		mu.Lock()
		open[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				c.Close()
			}()
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
				if _, err := c.Write(tcpHelloAnswer); err != nil {
					return
				}
			}
		})
	}
}

// probeTCP checks that target (tcp://host:port) answers x.
func probeTCP(target string, x *TCPExchange) error {
	c, err := net.DialTimeout("tcp", target[len("tcp://"):], 5*time.Second)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(x.Send); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	got := make([]byte, len(x.Expect))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if !bytes.Equal(got, x.Expect) {
		return fmt.Errorf("probe: answer %q, want %q", got, x.Expect)
	}
	return nil
}
