package raftnode

import (
	"context"
	"net"
	"time"
)

// Peer connections must notice a silent peer. A network partition drops
// packets without a reset, and TCP left alone waits: an idle connection
// forever, one with unacknowledged data through its retransmission
// back-off, which after a minute of partition retries 45 s after the heal
// (FACTS.md). So every peer connection, dialled or accepted, gets
// keepalive probes and a user timeout: the kernel ends it once nothing it
// sent has been acknowledged for PeerUserTimeout, and probes an idle one
// from PeerKeepAliveIdle on. The connection's owner then dials afresh,
// which reaches a healed peer at once.
const (
	PeerUserTimeout   = 5 * time.Second
	PeerKeepAliveIdle = 2 * time.Second
	peerKeepAliveIntv = time.Second
	peerKeepAliveCnt  = 3
)

var peerKeepAlive = net.KeepAliveConfig{Enable: true, Idle: PeerKeepAliveIdle, Interval: peerKeepAliveIntv, Count: peerKeepAliveCnt}

// PeerDialer dials peer connections with keepalive and the user timeout
// set before the connection is made.
func PeerDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAliveConfig: peerKeepAlive, Control: setUserTimeout}
}

// DialPeer dials a peer connection (PeerDialer without a timeout of its
// own: ctx bounds it).
func DialPeer(ctx context.Context, network, addr string) (net.Conn, error) {
	return PeerDialer(0).DialContext(ctx, network, addr)
}

// TunePeerConn gives an accepted connection what PeerDialer gives a dialled
// one. Anything that is not TCP is left as it is.
func TunePeerConn(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetKeepAliveConfig(peerKeepAlive)
	if rc, err := tc.SyscallConn(); err == nil {
		_ = setUserTimeout("tcp", "", rc)
	}
}

// AbortPeerConn closes c with a reset, dropping what it had not sent yet:
// a connection given up on must not deliver its queued requests once the
// network heals.
func AbortPeerConn(c net.Conn) error {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return c.Close()
}

// peerListener tunes every connection it accepts.
type peerListener struct{ net.Listener }

// PeerListener wraps ln so that the connections it accepts are tuned as
// peer connections.
func PeerListener(ln net.Listener) net.Listener { return peerListener{ln} }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		TunePeerConn(c)
	}
	return c, err
}
