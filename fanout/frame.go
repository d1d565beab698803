package fanout

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/wire"
)

// NOTE: this file turns what the pipeline publishes (view frames) and
// answers (snapshot replies) into the hub's immutable frame and snapshot
// values. The wire format is package wire's (wire/frame.go: Frame,
// Snapshot, ParseFrame, ParseSnapshot); what the hub adds is the position
// from the Tc-Seq/Tc-Prev headers, checked, and the per-variant encodings.

// Errors of frame and snapshot decoding.
var (
	ErrBadFrame    = errors.New("fanout: malformed view frame")
	ErrBadSnapshot = errors.New("fanout: malformed snapshot reply")
	ErrSnapshot    = errors.New("fanout: snapshot request failed")
)

// frame is one view frame as the hub keeps it. Everything but enc is
// immutable after decodeFrame; enc is written under the owning feed's lock
// the first time a subscriber of that variant needs it, and cleared under
// it when Sweep cuts a lingering feed (trimIdle) and when the frame falls
// behind its ring's newest keepEncoded (onMsg); the byte slices in it are
// never written, so every subscriber's queue shares them read-only.
type frame struct {
	seq, prev uint64
	events    []json.RawMessage
	changes   json.RawMessage
	eventTS   int64 // the first event's "timestamp" (Unix ms), 0 if absent
	recvAt    int64 // when this node received it (Unix ns)
	sentAt    int64 // when ingest sent it (wire.HeaderSent, Unix ns), 0 if absent
	size      int
	enc       [numVariants][][]byte
	wide      bool        // changes may restate messages: windowed subscribers get their own encoding
	wenc      []windowEnc // those encodings (window.go), guarded like enc
	run       runState    // frameRun's cache, guarded like enc
	runDone   bool
	// runBefore is the run open before the frame, as its feed knew it when
	// the frame came (onMsg), or learnt it later from a snapshot
	// (learnRunLocked); guarded by the feed's lock.
	runBefore openRun
	// verdicts are the events' verdicts on the view (coalesce.go), set
	// under the feed's lock before the frame is delivered when the feed's
	// verdict fold follows it; nil otherwise. Never written afterwards.
	verdicts []uint8
	// lanesOpen: chunk lanes were open before the frame's first event
	// (set with verdicts): its consolidation cannot assume them closed.
	lanesOpen bool
}

// decodeFrame parses a view frame. The message data belongs to the frame
// afterwards (nats.go hands every callback its own copy of the payload).
func decodeFrame(m *nats.Msg) (*frame, error) {
	seq, err := headerUint(m, wire.HeaderSeq)
	if err != nil {
		return nil, err
	}
	prev, err := headerUint(m, wire.HeaderPrev)
	if err != nil {
		return nil, err
	}
	if prev >= seq {
		return nil, fmt.Errorf("%w: %s %d not after %s %d", ErrBadFrame, wire.HeaderSeq, seq, wire.HeaderPrev, prev)
	}
	// The members are found by structure (scan.go) and the events alias
	// the message: encoding/json would copy every event into an object of
	// its own, and a thread's ring holds thousands of frames. Each slice's
	// capacity ends with it, so that no append can reach into the message.
	f := &frame{seq: seq, prev: prev, size: len(m.Data) + 64, recvAt: time.Now().UnixNano()}
	err = scanObject(m.Data, func(name, v []byte) error {
		switch string(name) {
		case "events":
			if string(v) == "null" {
				f.events = nil
				return nil
			}
			evs, err := scanArray(v)
			if err != nil {
				return fmt.Errorf("events: %w", err)
			}
			f.events = evs
		case "changes":
			f.changes = v[:len(v):len(v)]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	f.wide = isWide(f.changes)
	if h := m.Header.Get(wire.HeaderSent); h != "" {
		f.sentAt, _ = strconv.ParseInt(h, 10, 64)
	}
	if len(f.events) > 0 {
		f.eventTS = eventTimestamp(f.events[0])
	}
	return f, nil
}

// eventTimestamp returns the event's "timestamp" (Unix ms), 0 when it has
// none or it is not an integer.
func eventTimestamp(ev []byte) int64 {
	var ts int64
	_ = scanObject(ev, func(name, v []byte) error {
		if string(name) != "timestamp" {
			return nil
		}
		ts, _ = strconv.ParseInt(string(v), 10, 64)
		return errStop
	})
	return ts
}

func headerUint(m *nats.Msg, name string) (uint64, error) {
	v := m.Header.Get(name)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: header %s=%q", ErrBadFrame, name, trunc(v))
	}
	return n, nil
}

// snapshot is a snapshot reply as the hub keeps it: immutable except enc,
// which follows the same rule as frame.enc.
type snapshot struct {
	seq     uint64
	window  int // the window it was asked for; 0: the whole view
	status  string
	view    json.RawMessage
	events  []json.RawMessage
	enc     [numVariants][][]byte
	run     runState // snapshotFor's cache, guarded like enc
	runDone bool
}

func decodeSnapshot(m *nats.Msg) (*snapshot, error) {
	if kind := m.Header.Get(wire.HeaderErrorKind); kind != "" {
		return nil, fmt.Errorf("%w: %s: %s", ErrSnapshot, kind, trunc(m.Header.Get(wire.HeaderError)))
	}
	// The members are found by structure (scan.go), not decoded with
	// encoding/json: a long thread's reply is hundreds of megabytes, and
	// only seq and status need decoding.
	var sn snapshot
	var seqRaw []byte
	err := scanObject(m.Data, func(name, v []byte) error {
		var err error
		switch string(name) {
		case "seq":
			seqRaw = v
			sn.seq, err = strconv.ParseUint(string(v), 10, 64)
		case "status":
			err = json.Unmarshal(v, &sn.status)
		case "window":
			sn.window, err = strconv.Atoi(string(v))
		case "view":
			sn.view = v
		case "events":
			if string(v) != "null" {
				sn.events, err = scanArray(v)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if len(sn.view) == 0 || string(sn.view) == "null" {
		return nil, fmt.Errorf("%w: no view", ErrBadSnapshot)
	}
	if seqRaw == nil {
		return nil, fmt.Errorf("%w: no seq", ErrBadSnapshot)
	}
	// The header, when present, must agree with the body: a disagreement
	// means a producer bug, and guessing would risk a silent gap.
	if h := m.Header.Get(wire.HeaderSeq); h != "" && h != strconv.FormatUint(sn.seq, 10) {
		return nil, fmt.Errorf("%w: %s %q but seq %d", ErrBadSnapshot, wire.HeaderSeq, trunc(h), sn.seq)
	}
	return &sn, nil
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
