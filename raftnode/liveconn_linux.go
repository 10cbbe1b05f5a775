package raftnode

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT (Linux): how long sent data may stay
// unacknowledged before the kernel ends the connection.
func setUserTimeout(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(PeerUserTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
