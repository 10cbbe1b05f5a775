package rift

// StatusError is a non-zero ABI v1 status returned by a flow or response
// import. Compare with errors.Is against the Err values.
type StatusError int32

// The ABI v1 statuses, as errors.
const (
	ErrNotFound    StatusError = 1 // the key is absent
	ErrCASMismatch StatusError = 2 // the version did not match; nothing was written
	ErrUnavailable StatusError = 3 // the flow's owner cannot be reached: give up
	ErrTooLarge    StatusError = 4 // a key, value or response is over its limit
	ErrBadMemory   StatusError = 5 // a pointer or length was outside memory
)

func (e StatusError) Error() string {
	switch e {
	case ErrNotFound:
		return "rift: not found"
	case ErrCASMismatch:
		return "rift: cas mismatch"
	case ErrUnavailable:
		return "rift: flow unavailable"
	case ErrTooLarge:
		return "rift: too large"
	case ErrBadMemory:
		return "rift: bad memory"
	}
	return "rift: unknown status"
}

// Level is a log level for Log.
type Level int32

// Log levels, as the host numbers them.
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)
