package cluster

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout reads c's TCP_USER_TIMEOUT.
func userTimeout(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var serr error
	if err := rc.Control(func(fd uintptr) { ms, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return time.Duration(ms) * time.Millisecond
}
