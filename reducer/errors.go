package reducer

import (
	"errors"
	"strconv"

	"github.com/threadcast/threadcast/codec"
)

// Sentinel errors. A *ProtocolError is also ErrProtocol under errors.Is.
var (
	// ErrProtocol is what every *ProtocolError matches: the stream broke a
	// sequence rule of AG-UI 1.0 and was rejected.
	ErrProtocol = errors.New("reducer: protocol violation")
	// ErrRejected is wrapped by the error Apply returns for an event that
	// arrives after the stream was rejected and is not a RUN_STARTED.
	ErrRejected = errors.New("reducer: stream already rejected; only RUN_STARTED is accepted")
	// ErrStaleSeq is returned for an event whose seq is below Thread.Seq().
	ErrStaleSeq = errors.New("reducer: sequence number below the last applied one")
	// ErrCheckpoint wraps every failure of LoadCheckpoint.
	ErrCheckpoint = errors.New("reducer: bad checkpoint")
)

// ProtocolError is a fatal verdict: the consumer rejects the stream
// (processing.md §7, "FATAL"). It is not a producer's RUN_ERROR.
type ProtocolError struct {
	// Code is the row of the spec's verdict table (processing.md §7) that
	// applies: "L1".."L12" lifecycle, "S1".."S18" streaming, "A1".."A11"
	// attribution and subagents, "P1".."P9" patches and activity, "X4" a
	// malformed value the codec found (see Thread.Reject).
	Code string
	// Seq is the stream sequence of the offending event.
	Seq uint64
	// Type is the offending event's type (TypeUnknown when the codec could
	// not tell).
	Type codec.Type
	// Reason says what was wrong, quoting a truncated copy of the bad input.
	Reason string
	// Err is the underlying error, if any (a codec error for Reject).
	Err error
}

func (e *ProtocolError) Error() string {
	b := make([]byte, 0, 64+len(e.Reason))
	b = append(b, "reducer: seq "...)
	b = strconv.AppendUint(b, e.Seq, 10)
	if name := e.Type.String(); name != "" {
		b = append(b, ' ')
		b = append(b, name...)
	}
	b = append(b, ": "...)
	b = append(b, e.Code...)
	b = append(b, ": "...)
	b = append(b, e.Reason...)
	return string(b)
}

// Is reports whether target is ErrProtocol, or a *ProtocolError with the same
// Code (so errors.Is(err, &ProtocolError{Code: "S1"}) tests the verdict row).
func (e *ProtocolError) Is(target error) bool {
	if target == ErrProtocol {
		return true
	}
	t, ok := target.(*ProtocolError)
	return ok && t.Code == e.Code
}

// Unwrap returns the underlying error.
func (e *ProtocolError) Unwrap() error { return e.Err }

// rejectedError is the error for an event refused because the stream was
// already rejected. It wraps ErrRejected.
type rejectedError struct {
	seq    uint64
	typ    codec.Type
	reason string
}

func (e *rejectedError) Error() string {
	return "reducer: seq " + strconv.FormatUint(e.seq, 10) + " " + e.typ.String() +
		" refused: stream already rejected (" + e.reason + ")"
}

func (e *rejectedError) Unwrap() error { return ErrRejected }

// quote returns s in quotes, truncated to a readable length, for error and
// warning messages (STYLE practice 12).
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
