package jsondoc

import (
	"errors"
	"fmt"

	"github.com/threadcast/threadcast/codec"
)

// Sentinel causes. A *PatchError wraps exactly one of them, so callers can
// tell "the patch does not apply" apart by cause with errors.Is, and get
// the operation index and path with errors.As.
var (
	// ErrInvalidJSON: input to Parse, Set, MergeShallow, Equal or an op's
	// value is not exactly one valid JSON value.
	ErrInvalidJSON = errors.New("jsondoc: invalid JSON")
	// ErrNotObject: MergeShallow got, or would merge into, a non-object.
	ErrNotObject = errors.New("jsondoc: not an object")
	// ErrInvalidPointer: a path or from is not an RFC 6901 JSON Pointer.
	ErrInvalidPointer = errors.New("jsondoc: invalid JSON pointer")
	// ErrNotFound: a pointer names a member or element that does not exist
	// (including the parent of an add target).
	ErrNotFound = errors.New("jsondoc: path not found")
	// ErrBadIndex: an array token is not a valid index for the operation
	// ("01", "x", "-" where no element is named, or past the end).
	ErrBadIndex = errors.New("jsondoc: bad array index")
	// ErrNotContainer: a pointer goes through a scalar (string, number,
	// boolean or null).
	ErrNotContainer = errors.New("jsondoc: path goes through a non-container")
	// ErrMoveIntoChild: move's from is a proper prefix of its path.
	ErrMoveIntoChild = errors.New("jsondoc: move into own child")
	// ErrTestFailed: a test operation compared unequal.
	ErrTestFailed = errors.New("jsondoc: test failed")
	// ErrBadOp: add, replace or test without a value, or an unknown
	// op kind. The codec rejects both before they get here.
	ErrBadOp = errors.New("jsondoc: malformed operation")
)

// PatchError reports why Apply refused a patch. The document is unchanged.
type PatchError struct {
	Index  int          // index of the failing operation in the patch
	Op     codec.OpKind // its kind
	Path   string       // its path (a private copy, still ~-escaped)
	From   string       // its from, for move and copy
	Reason string       // human detail, e.g. "index 9 > length 4"
	Err    error        // one of the sentinel causes above
}

func (e *PatchError) Error() string {
	loc := e.Path
	if e.From != "" || e.Op == codec.OpMove || e.Op == codec.OpCopy {
		loc = fmt.Sprintf("%q -> %q", e.From, e.Path)
	} else {
		loc = fmt.Sprintf("%q", loc)
	}
	return fmt.Sprintf("jsondoc: op %d (%s %s): %s: %s", e.Index, OpName(e.Op), loc, trimPrefix(e.Err), e.Reason)
}

// Unwrap returns the sentinel cause.
func (e *PatchError) Unwrap() error { return e.Err }

func trimPrefix(err error) string {
	s := err.Error()
	const p = "jsondoc: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// OpName returns the RFC 6902 name of an op kind ("add", ...).
func OpName(k codec.OpKind) string {
	switch k {
	case codec.OpAdd:
		return "add"
	case codec.OpRemove:
		return "remove"
	case codec.OpReplace:
		return "replace"
	case codec.OpMove:
		return "move"
	case codec.OpCopy:
		return "copy"
	case codec.OpTest:
		return "test"
	}
	return fmt.Sprintf("op(%d)", k)
}

// opError is an internal failure before Index/Op/Path are known.
type opError struct {
	err    error
	reason string
}

func fail(err error, format string, args ...any) *opError {
	return &opError{err: err, reason: fmt.Sprintf(format, args...)}
}

// errInvalidJSON quotes a truncated copy of the bad input.
func errInvalidJSON(raw []byte) error {
	return fmt.Errorf("%w: %s", ErrInvalidJSON, quoteTrunc(raw))
}

func quoteTrunc(b []byte) string {
	const max = 64
	if len(b) > max {
		return fmt.Sprintf("%q…(%d bytes)", b[:max], len(b))
	}
	return fmt.Sprintf("%q", b)
}
