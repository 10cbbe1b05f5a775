//go:build !linux

package loadtest

import "time"

// fineTimer is time.Sleep where there is no timerfd: an open loop's
// latencies may then include the runtime's timer lateness.
type fineTimer struct{}

func newFineTimer() (*fineTimer, error) { return &fineTimer{}, nil }

func (*fineTimer) sleep(d time.Duration) error { time.Sleep(d); return nil }

func (*fineTimer) close() {}
