package gateway

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
)

// access enforces --localOnly and --ipWhitelist where it is cheapest: at
// accept time, for the admin API and every imposter alike. A refused
// connection is closed before a byte is read, as mb destroys the socket.
type access struct {
	localOnly bool
	allowAll  bool
	allowed   []net.IP
	log       *slog.Logger
	// onBlocked, when set, is told the port of each refused connection
	// (for mb_blocked_ip_total); set before the first listener is bound.
	onBlocked func(port int)
}

func newAccess(localOnly bool, whitelist []string, log *slog.Logger) (*access, error) {
	a := &access{localOnly: localOnly, allowAll: true, log: log}
	for _, w := range whitelist {
		w = strings.TrimSpace(w)
		if w == "" || w == "*" {
			continue
		}
		ip := net.ParseIP(w)
		if ip == nil {
			return nil, fmt.Errorf("--ipWhitelist: %q is not an IP address", w)
		}
		a.allowAll = false
		a.allowed = append(a.allowed, ip)
	}
	return a, nil
}

func (a *access) permits(ip net.IP) bool {
	if a.localOnly && !ip.IsLoopback() {
		return false
	}
	if a.allowAll {
		return true
	}
	for _, w := range a.allowed {
		if w.Equal(ip) {
			return true
		}
	}
	return false
}

// listen binds addr and filters its connections.
func (a *access) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	if !a.localOnly && a.allowAll {
		return ln, nil
	}
	return filtered{ln, a}, nil
}

type filtered struct {
	net.Listener
	a *access
}

func (f filtered) Accept() (net.Conn, error) {
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok && !f.a.permits(tcp.IP) {
			f.a.log.Warn("connection refused: address not allowed", "remote", tcp.String())
			if la, ok := f.Addr().(*net.TCPAddr); ok && f.a.onBlocked != nil {
				f.a.onBlocked(la.Port)
			}
			c.Close()
			continue
		}
		return c, nil
	}
}
