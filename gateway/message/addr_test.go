package message

import (
	"net"
	"testing"

	"pgregory.net/rapid"
)

// TestRequestFromRendersAsNet: the one-pass rendering of the client's
// address matches net.TCPAddr's two, for every address family, and so
// does its length worked out without rendering.
func TestRequestFromRendersAsNet(t *testing.T) {
	for _, a := range []*net.TCPAddr{
		{IP: net.IPv4(127, 0, 0, 1), Port: 5000},
		{IP: net.ParseIP("10.1.2.3").To4(), Port: 1},
		{IP: net.ParseIP("::1"), Port: 65535},
		{IP: net.ParseIP("2001:db8::8a2e:370:7334"), Port: 80},
		{IP: net.ParseIP("fe80::1"), Port: 8, Zone: "eth0"},
		{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 443},
	} {
		checkAddr(t, a)
	}
	rapid.Check(t, func(rt *rapid.T) {
		ip := net.IP(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(rt, "ip4"))
		if rapid.Bool().Draw(rt, "v6") {
			ip = net.IP(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "ip6"))
		}
		checkAddr(rt, &net.TCPAddr{IP: ip, Port: rapid.IntRange(0, 65535).Draw(rt, "port")})
	})
}

func checkAddr(t interface{ Errorf(string, ...any) }, a *net.TCPAddr) {
	r := &Request{addr: a}
	if got, want := r.RequestFromLen(), len(a.String()); got != want {
		t.Errorf("RequestFromLen %d, want %d (%s)", got, want, a)
	}
	if got, want := r.RequestFrom(), a.String(); got != want {
		t.Errorf("RequestFrom %q, want %q", got, want)
	}
	if got, want := r.RequestFromLen(), len(a.String()); got != want {
		t.Errorf("RequestFromLen %d once rendered, want %d (%s)", got, want, a)
	}
	r = &Request{addr: a}
	if got, want := r.IP(), a.IP.String(); got != want {
		t.Errorf("IP %q, want %q", got, want)
	}
}
