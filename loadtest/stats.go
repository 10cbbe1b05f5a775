package loadtest

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// Latencies are recorded in microseconds, from 1 µs to a minute, with three
// significant digits: exact below 2 ms, within 0.1% above.
const (
	histMin     = 1
	histMax     = int64(time.Minute / time.Microsecond)
	histSigFigs = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histSigFigs) }

// errKind classifies a failed request.
type errKind uint8

const (
	errConnect errKind = iota // refused, unreachable, dial timeout
	errTimeout                // no response within the timeout
	errReset                  // connection reset or broken pipe
	errClosed                 // server closed the connection before answering
	errStatus                 // answered with a status other than the expected one
	errTLS                    // handshake failed, or a TLS alert (see isTLSError)
	errOther
	numErrKinds
)

var errKindNames = [numErrKinds]string{"connect", "timeout", "reset", "closed", "status", "tls", "other"}

func (k errKind) String() string { return errKindNames[k] }

func classify(err error) errKind {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &oe) && oe.Op == "dial":
		return errConnect
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return errReset
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errClosed
	case isTLSError(err):
		// After the transport kinds: a handshake cut short by a timeout,
		// a reset or a close is the server's load, not its TLS setup.
		return errTLS
	default:
		return errOther
	}
}

const maxStatus = 600

// shard is one slice of the run's statistics. Workers share a few shards
// (each behind its own mutex) rather than owning one each, because a
// histogram is about 140 KB and a run may have thousands of connections.
type shard struct {
	mu          sync.Mutex
	total       *hdrhistogram.Histogram // corrected latency of measured requests
	uncorrected *hdrhistogram.Histogram // from the actual send time (open loop)
	interval    *hdrhistogram.Histogram // since the last timeline point
	requests    int64                   // measured, completed
	warmup      int64
	errs        [numErrKinds]int64
	status      [maxStatus]int64
	ivRequests  int64
	ivErrors    int64
	firstErr    [numErrKinds]string // one example message per kind, for the report
}

func newShard() *shard {
	return &shard{total: newHist(), uncorrected: newHist(), interval: newHist()}
}

// sample is the outcome of one request, times in nanoseconds since the run's
// base time.
type sample struct {
	intended, sent, done int64
	err                  error
	status               int
	expect               int
}

func (s *shard) record(x *sample, measureFrom int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x.sent < measureFrom {
		s.warmup++
		return
	}
	s.requests++
	s.ivRequests++
	corrected := max((x.done-x.intended)/int64(time.Microsecond), histMin)
	actual := max((x.done-x.sent)/int64(time.Microsecond), histMin)
	// RecordValue fails only above histMax; clamping keeps a minute-long
	// stall visible as "at least a minute" rather than dropped.
	_ = s.total.RecordValue(min(corrected, histMax))
	_ = s.uncorrected.RecordValue(min(actual, histMax))
	_ = s.interval.RecordValue(min(corrected, histMax))
	if x.err != nil {
		k := classify(x.err)
		s.errs[k]++
		s.ivErrors++
		if s.firstErr[k] == "" {
			s.firstErr[k] = x.err.Error()
		}
		return
	}
	if x.status >= 0 && x.status < maxStatus {
		s.status[x.status]++
	}
	if x.expect != 0 && x.status != x.expect {
		s.errs[errStatus]++
		s.ivErrors++
		if s.firstErr[errStatus] == "" {
			s.firstErr[errStatus] = "got status " + strconv.Itoa(x.status) + ", expected " + strconv.Itoa(x.expect)
		}
	}
}
