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

// newPartHist is a step's or a stage's histogram: two significant digits
// (within 1%), 20 KB against the whole run's 140 KB, since a scenario may
// have a thousand steps in each of a few dozen shards.
func newPartHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, 2) }

// tally counts the measured requests of one step or one ramp stage.
type tally struct {
	requests, errors     int64
	checks, failedChecks int64
	hist                 *hdrhistogram.Histogram // allocated on the first request
}

func (t *tally) add(latency int64, failed bool, checks int, failedChecks int) {
	if t.hist == nil {
		t.hist = newPartHist()
	}
	t.requests++
	_ = t.hist.RecordValue(latency)
	if failed {
		t.errors++
	}
	t.checks += int64(checks)
	t.failedChecks += int64(failedChecks)
}

func (t *tally) merge(o *tally) {
	t.requests += o.requests
	t.errors += o.errors
	t.checks += o.checks
	t.failedChecks += o.failedChecks
	if o.hist != nil {
		if t.hist == nil {
			t.hist = newPartHist()
		}
		t.hist.Merge(o.hist)
	}
}

// checkTally counts one check's outcomes, with the first failure seen.
type checkTally struct {
	passes, fails int64
	example       string
}

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
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, errWSClosed):
		return errClosed
	case isGRPCStatus(err):
		return errStatus
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
	steps       []tally             // by step, when the scenario has more than one
	stages      []tally             // by ramp stage
	checks      []checkTally        // by check, numbered across the steps
}

func newShard(steps, stages, checks int) *shard {
	s := &shard{total: newHist(), uncorrected: newHist(), interval: newHist(), stages: make([]tally, stages),
		checks: make([]checkTally, checks)}
	if steps > 1 {
		s.steps = make([]tally, steps)
	}
	return s
}

// sample is the outcome of one request, times in nanoseconds since the run's
// base time.
type sample struct {
	intended, sent, done int64
	err                  error
	status               int
	expect               int
	step                 *compiledStep
	stepIndex            int
	stage                int    // ramp stage of the intended time; -1 for none
	failed               uint64 // the step's checks that failed, by bit
	// resp and doc are the answered response, for describing a failed check.
	resp *fasthttp.Response
	doc  *jsonDoc
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
	corrected := min(max((x.done-x.intended)/int64(time.Microsecond), histMin), histMax)
	actual := max((x.done-x.sent)/int64(time.Microsecond), histMin)
	// RecordValue fails only above histMax; clamping keeps a minute-long
	// stall visible as "at least a minute" rather than dropped.
	_ = s.total.RecordValue(corrected)
	_ = s.uncorrected.RecordValue(min(actual, histMax))
	_ = s.interval.RecordValue(corrected)
	failed := s.classify(x)
	if failed {
		s.ivErrors++
	}
	checks, failedChecks := 0, 0
	if x.err == nil && x.step != nil && len(x.step.checks) > 0 {
		checks = len(x.step.checks)
		for i, c := range x.step.checks {
			ct := &s.checks[x.step.checkBase+i]
			if x.failed&(1<<i) == 0 {
				ct.passes++
				continue
			}
			failedChecks++
			ct.fails++
			if ct.example == "" {
				ct.example = c.seen(x.resp, x.doc)
			}
		}
	}
	if s.steps != nil {
		s.steps[x.stepIndex].add(corrected, failed, checks, failedChecks)
	}
	if x.stage >= 0 {
		s.stages[x.stage].add(corrected, failed, checks, failedChecks)
	}
}

// classify counts x's status and error; it reports whether x failed.
func (s *shard) classify(x *sample) bool {
	if x.err != nil {
		k := classify(x.err)
		s.errs[k]++
		if s.firstErr[k] == "" {
			s.firstErr[k] = x.err.Error()
		}
		return true
	}
	if x.status >= 0 && x.status < maxStatus {
		s.status[x.status]++
	}
	if x.expect != 0 && x.status != x.expect {
		s.errs[errStatus]++
		if s.firstErr[errStatus] == "" {
			s.firstErr[errStatus] = "got status " + strconv.Itoa(x.status) + ", expected " + strconv.Itoa(x.expect)
		}
		return true
	}
	return false
}
