package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// The snapshot request and reply (see frame.go for the format).

// Snapshot error kinds (Tc-Error-Kind of a failed snapshot reply).
const (
	SnapErrBadRequest = "bad-request"     // the subject does not name a valid thread
	SnapErrPartition  = "wrong-partition" // p is not the thread's partition
	SnapErrBusy       = "busy"            // the shard's request queue is full; retry
	SnapErrStore      = "store"           // the checkpoint could not be read
	SnapErrNoMessage  = "no-message"      // a page's before names no message of the thread
	// SnapErrUnsent: a reply sent in place of one that could not be sent
	// (the connection refused it); the request may be retried.
	SnapErrUnsent = "unsent"
)

// Snapshot is a decoded snapshot reply.
type Snapshot struct {
	Tenant string            `json:"tenant"`
	Window int               `json:"window,omitempty"`
	Thread string            `json:"thread"`
	Seq    uint64            `json:"seq"`
	Status string            `json:"status,omitempty"`
	Found  bool              `json:"found"`
	View   json.RawMessage   `json:"view"`
	Events []json.RawMessage `json:"events"`
}

// SnapRequest is the body of a request on a snapshot subject. The zero
// SnapRequest asks for the whole snapshot.
type SnapRequest struct {
	// Window > 0 asks for a windowed snapshot of the newest Window messages.
	Window int `json:"window,omitempty"`
	// Page, when set, asks for a page of messages instead of a snapshot.
	Page *PageRequest `json:"page,omitempty"`
}

// ErrBadRequest is wrapped by ParseSnapRequest's errors.
var ErrBadRequest = errors.New("wire: bad snapshot request")

// Encode returns the request body: nil for the whole snapshot.
func (r SnapRequest) Encode() []byte {
	if r.Window == 0 && r.Page == nil {
		return nil
	}
	b, _ := json.Marshal(r) // two ints and a string: never fails
	return b
}

// ParseSnapRequest decodes a request body (empty: the whole snapshot). A
// window or limit below 1, or a request for both a window and a page, is an
// error wrapping ErrBadRequest.
func ParseSnapRequest(b []byte) (SnapRequest, error) {
	var r SnapRequest
	if len(b) == 0 {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return SnapRequest{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	switch {
	case r.Page != nil && r.Window != 0:
		return SnapRequest{}, fmt.Errorf("%w: both a window and a page", ErrBadRequest)
	case r.Page != nil && r.Page.Limit < 1:
		return SnapRequest{}, fmt.Errorf("%w: page limit %d, want at least 1", ErrBadRequest, r.Page.Limit)
	case r.Window < 0:
		return SnapRequest{}, fmt.Errorf("%w: window %d, want at least 1", ErrBadRequest, r.Window)
	}
	return r, nil
}

// ParseSnapshot decodes a snapshot reply, returning the error a failed
// reply carries in its headers.
func ParseSnapshot(msg *nats.Msg) (Snapshot, error) {
	if kind := msg.Header.Get(HeaderErrorKind); kind != "" {
		return Snapshot{}, fmt.Errorf("wire: snapshot failed: %s: %s", kind, msg.Header.Get(HeaderError))
	}
	var s Snapshot
	if err := json.Unmarshal(msg.Data, &s); err != nil {
		return Snapshot{}, fmt.Errorf("wire: bad snapshot: %w", err)
	}
	return s, nil
}
