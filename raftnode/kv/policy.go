package kv

import (
	"fmt"
	"math"
)

// HardMaxEvict caps the records one Evict may examine whatever the policy
// says, because eviction runs inside apply and blocks every apply behind it.
const HardMaxEvict = 10_000

// CommandEnvelopeBytes bounds the encoding of a Put beyond its key and value
// bytes (array header, tag, two byte-string headers, expectation, TTL and
// clock). TestMaxCommandBytesCoversWorstCasePut pins it.
const CommandEnvelopeBytes = 64

// Policy bounds one fragment. It lives in code, never in the log or a
// snapshot: a policy that differs between nodes diverges the cluster.
type Policy struct {
	MaxKeyBytes        int    // keys are 1..MaxKeyBytes bytes
	MaxValueBytes      int    // values are 0..MaxValueBytes bytes
	MaxTTLMs           uint64 // a Put's TTL above this is rejected
	AllowNoExpiry      bool   // whether Put.NoExpiry is accepted
	MaxEntries         int    // stored records, expired-but-unreclaimed included
	MaxBytes           int64  // sum of key and value bytes of stored records
	MaxEvictPerCommand uint32 // an Evict's limit is capped here, then by HardMaxEvict
}

// DefaultPolicy returns 1 KiB keys, 1 MiB values, TTLs up to 24 h, no
// never-expiring entries, 100k entries, 256 MiB and 1000 evictions per
// command.
func DefaultPolicy() Policy {
	return Policy{
		MaxKeyBytes:        1 << 10,
		MaxValueBytes:      1 << 20,
		MaxTTLMs:           24 * 60 * 60 * 1000,
		MaxEntries:         100_000,
		MaxBytes:           256 << 20,
		MaxEvictPerCommand: 1000,
	}
}

// Validate reports a policy that could not bound anything.
func (p Policy) Validate() error {
	switch {
	case p.MaxKeyBytes < 1:
		return fmt.Errorf("kv: policy MaxKeyBytes %d < 1", p.MaxKeyBytes)
	case p.MaxValueBytes < 0:
		return fmt.Errorf("kv: policy MaxValueBytes %d < 0", p.MaxValueBytes)
	case p.MaxTTLMs < 1:
		return fmt.Errorf("kv: policy MaxTTLMs is 0")
	case p.MaxEntries < 1:
		return fmt.Errorf("kv: policy MaxEntries %d < 1", p.MaxEntries)
	case p.MaxBytes < 1:
		return fmt.Errorf("kv: policy MaxBytes %d < 1", p.MaxBytes)
	case p.MaxEvictPerCommand < 1 || p.MaxEvictPerCommand > HardMaxEvict:
		return fmt.Errorf("kv: policy MaxEvictPerCommand %d outside 1..%d", p.MaxEvictPerCommand, HardMaxEvict)
	}
	return nil
}

// MaxCommandBytes is the largest encoded Command this policy admits. The
// transport's body cap, and the Raft message size it derives, must cover it
// (plus the embedding application's own envelope) or a lagging follower can
// be sent a batch it refuses forever.
func (p Policy) MaxCommandBytes() int {
	return p.MaxKeyBytes + p.MaxValueBytes + CommandEnvelopeBytes
}

// CheckKey is the proposer-side key check; Apply runs the same check.
func (p Policy) CheckKey(key string) error {
	if r := p.checkKey(key); r != 0 {
		return r
	}
	return nil
}

// CheckPut is the proposer-side check of a Put, run before it is encoded and
// replicated; Apply runs the same check so that a proposer that skipped it
// cannot diverge the cluster.
func (p Policy) CheckPut(c Put) error {
	if r := p.checkPut(c, c.NowMs); r != 0 {
		return r
	}
	return nil
}

func (p Policy) checkKey(key string) Reason {
	switch {
	case len(key) == 0:
		return ReasonKeyEmpty
	case len(key) > p.MaxKeyBytes:
		return ReasonKeyTooLarge
	}
	return 0
}

// checkPut validates c as if decided at instant at (Apply passes the
// effective time, so the overflow check covers what it will compute).
func (p Policy) checkPut(c Put, at uint64) Reason {
	if r := p.checkKey(c.Key); r != 0 {
		return r
	}
	if len(c.Value) > p.MaxValueBytes {
		return ReasonValueTooLarge
	}
	if c.NoExpiry {
		switch {
		case c.TTLMs != 0:
			return ReasonMalformed
		case !p.AllowNoExpiry:
			return ReasonNoExpiryNotAllowed
		}
		return 0
	}
	switch {
	case c.TTLMs == 0:
		return ReasonTTLZero
	case c.TTLMs > p.MaxTTLMs:
		return ReasonTTLTooLarge
	case at > math.MaxUint64-c.TTLMs:
		return ReasonTTLOverflow
	}
	return 0
}

// Reason says why a command was rejected. Its values are a wire format:
// append only, never renumber.
type Reason uint8

// Rejection reasons. Zero is not a reason.
const (
	ReasonKeyEmpty           Reason = 1
	ReasonKeyTooLarge        Reason = 2
	ReasonValueTooLarge      Reason = 3
	ReasonTTLZero            Reason = 4
	ReasonTTLTooLarge        Reason = 5
	ReasonTTLOverflow        Reason = 6
	ReasonNoExpiryNotAllowed Reason = 7
	ReasonQuotaEntries       Reason = 8
	ReasonQuotaBytes         Reason = 9
	ReasonInvalidExpect      Reason = 10
	ReasonEvictLimitZero     Reason = 11
	ReasonMalformed          Reason = 12
	ReasonZeroIndex          Reason = 13
)

var reasonText = map[Reason]string{
	ReasonKeyEmpty:           "empty key",
	ReasonKeyTooLarge:        "key too large",
	ReasonValueTooLarge:      "value too large",
	ReasonTTLZero:            "ttl 0 (use Delete)",
	ReasonTTLTooLarge:        "ttl above policy maximum",
	ReasonTTLOverflow:        "now + ttl overflows",
	ReasonNoExpiryNotAllowed: "no-expiry entries not allowed by policy",
	ReasonQuotaEntries:       "entry quota exceeded",
	ReasonQuotaBytes:         "byte quota exceeded",
	ReasonInvalidExpect:      "expectation not valid for this command",
	ReasonEvictLimitZero:     "evict limit 0",
	ReasonMalformed:          "malformed command",
	ReasonZeroIndex:          "log index 0",
}

// Error makes a Reason usable as an error, so errors.Is(err, ReasonTTLZero)
// works on what CheckPut returns.
func (r Reason) Error() string {
	if s, ok := reasonText[r]; ok {
		return "kv: " + s
	}
	return fmt.Sprintf("kv: rejected (reason %d)", uint8(r))
}
