//go:build !linux

package raftnode

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: the
// keepalive probes and the callers' own heartbeats still end a dead
// connection.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
