package message

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestRequestFromRendersAsNode: the client's address reads as mb (Node)
// writes a socket's remote address, in the family of the socket it came
// on, and its length worked out without rendering agrees.
func TestRequestFromRendersAsNode(t *testing.T) {
	for _, c := range []struct {
		addr     *net.TCPAddr
		from, ip string
	}{
		{&net.TCPAddr{IP: net.IP{127, 0, 0, 1}, Port: 5000}, "127.0.0.1:5000", "127.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3").To4(), Port: 1}, "10.1.2.3:1", "10.1.2.3"},
		// An IPv4 client of a dual-stack socket: Go's address is 16 bytes.
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, "::ffff:127.0.0.1:5000", "::ffff:127.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 443}, "::ffff:192.0.2.1:443", "::ffff:192.0.2.1"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 65535}, "::1:65535", "::1"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::8a2e:370:7334"), Port: 80}, "2001:db8::8a2e:370:7334:80", "2001:db8::8a2e:370:7334"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 8, Zone: "eth0"}, "fe80::1%eth0:8", "fe80::1%eth0"},
	} {
		checkAddr(t, c.addr, c.from, c.ip)
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := net.IPv4len
		if rapid.Bool().Draw(rt, "v6") {
			n = net.IPv6len
		}
		ip := net.IP(rapid.SliceOfN(rapid.Byte(), n, n).Draw(rt, "ip"))
		port := rapid.IntRange(0, 65535).Draw(rt, "port")
		a, _ := netip.AddrFromSlice(ip)
		checkAddr(rt, &net.TCPAddr{IP: ip, Port: port}, a.String()+":"+strconv.Itoa(port), a.String())
	})
}

func checkAddr(t interface{ Errorf(string, ...any) }, a *net.TCPAddr, from, ip string) {
	r := &Request{addr: a}
	if got := r.RequestFromLen(); got != len(from) {
		t.Errorf("RequestFromLen %d, want %d (%s)", got, len(from), from)
	}
	if got := r.RequestFrom(); got != from {
		t.Errorf("RequestFrom %q, want %q", got, from)
	}
	if got := r.RequestFromLen(); got != len(from) {
		t.Errorf("RequestFromLen %d once rendered, want %d (%s)", got, len(from), from)
	}
	if got := r.IP(); got != ip {
		t.Errorf("IP %q, want %q", got, ip)
	}
	r = &Request{addr: a}
	if got := r.IP(); got != ip || !strings.HasPrefix(r.RequestFrom(), ip+":") {
		t.Errorf("IP first %q, want %q", got, ip)
	}
}

// TestRequestFromKeepsTheSocketsFamily: over real sockets, a listener on
// all interfaces (dual-stack, as Node's) gives an IPv4 client's address
// mapped, and an IPv4 listener gives it plain, as mb records them.
func TestRequestFromKeepsTheSocketsFamily(t *testing.T) {
	for _, c := range []struct{ network, addr, dial, wantIP string }{
		{"tcp", ":0", "127.0.0.1", "::ffff:127.0.0.1"},
		{"tcp4", "127.0.0.1:0", "127.0.0.1", "127.0.0.1"},
		{"tcp", "[::1]:0", "::1", "::1"},
	} {
		ln, err := net.Listen(c.network, c.addr)
		if err != nil {
			if c.dial == "::1" {
				continue // no IPv6 loopback here
			}
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		want := c.wantIP
		if ln.Addr().(*net.TCPAddr).IP.To4() != nil {
			want = c.dial // a machine without IPv6: Node's listener is IPv4 too
		}
		done := make(chan net.Addr, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				done <- nil
				return
			}
			done <- conn.RemoteAddr()
			conn.Close()
		}()
		d, err := net.Dial("tcp", net.JoinHostPort(c.dial, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		local := d.LocalAddr().(*net.TCPAddr).Port
		remote := <-done
		d.Close()
		ln.Close()
		r := &Request{addr: remote}
		if got, want := r.RequestFrom(), want+":"+strconv.Itoa(local); got != want {
			t.Errorf("%s %s: requestFrom %q, want %q", c.network, c.addr, got, want)
		}
	}
}
