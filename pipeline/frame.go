package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// NOTE: the wire format of view frames and snapshot replies. fanout parses
// these; ingest produces them. Both are core NATS messages (not stored):
// the event log is the durable record, and a subscriber that misses a frame
// notices (Tc-Prev) and takes a snapshot.
//
// # Size
//
// Neither has a size limit of its own. A frame, a snapshot reply, a tap
// message or a dead letter larger than one NATS message (the connection's
// max payload, less 4 KiB for headers) is sent in parts (package wire):
// consecutive messages on the same subject carrying every header below
// plus Tc-Part: i/n and Tc-Part-Bytes, whose bodies joined in order are
// the body described here. A receiver joins them (wire.Assembler) and
// never sees part of a frame: a frame that lost a part is a lost frame,
// which the next frame's Tc-Prev reveals. A snapshot reply larger than a
// window (Config.ReplyWindow) is sent one window at a time, as the
// requester asks (wire.Request, wire.Responder: Tc-Part-More), so that the
// server never buffers more than a window of it for the requester. Small
// messages — nearly all — are sent as before: one message, no part header.
// The limits that remain are Config.MaxMsgSize (one stored message, so one
// event) and Config.MaxViewBytes (one thread's view).
//
// # Frame — subject view.<tenant>.<thread token>
//
// Headers:
//
//	Tc-Seq:  S   the stream sequence the thread's view reflects after this frame
//	Tc-Prev: P   the Tc-Seq of the thread's previous frame (0: none since the
//	             thread was created or reloaded from nothing)
//
// Body (JSON object):
//
//	{"tenant":"acme","thread":"<raw thread id>","seq":S,"prev":P,
//	 "status":"running",              // reducer.Status after this frame
//	 "events":[ {AG-UI event}, ... ], // accepted events in (P, S], normalized
//	                                  // (codec.AppendEvent) and compacted: applying
//	                                  // them to the view at P gives the view at S
//	 "changes":{...}}                 // the reducer's change journal for (P, S]
//	                                  // (view mode); absent when nothing changed
//
// changes, resolved against the view so a consumer without the reducer can
// apply it to the view document it holds (all members optional):
//
//	"messages":[{"index":i,"op":"add","message":{..}},     // new, at the end
//	            {"index":i,"op":"replace","message":{..}}, // re-send whole
//	            {"index":i,"op":"append","text":".."}],    // string content grew
//	"allMessages":[..],  // instead of "messages": inserted/removed/reordered
//	"stateOps":[[RFC 6902 patch],..]  // apply in order, or
//	"state":{..},        // the state replaced
//	"view":{..},         // runs, steps or subagents changed: the whole view
//	"warnings":n         // the view's new warning count
//
// Events the reducer refused stay in "events" in their place (folding the
// frame's events refuses them the same way). An event that could not be
// decoded at all has no AG-UI form: its rejection of the run shows only as
// "status":"rejected" and in changes.view (its run's error); an AG-UI
// consumer restates it as RUN_ERROR, as reducer.AppendSnapshotEvents does.
//
// A frame is published for every thread whose seq advanced in a processed
// batch — also when only warnings or skipped events advanced it — so the
// chain is dense: for consecutive frames F1, F2 of a thread, F2.Prev ==
// F1.Seq. A subscriber that holds seq L and receives a frame with Prev ≠ L
// has a gap and must resynchronise with a snapshot. After a crash, ingest
// replays from the last checkpoint and re-publishes frames whose Prev is that
// checkpoint's seq: subscribers see Prev ≠ L and resynchronise (never a silent
// gap, never a duplicate applied).
//
// # Snapshot — request on tc.snap.<p>.<tenant>.<thread token>
//
// p is Partition(tenant, token, P). The tenant and the thread come from the
// subject only, never from the body. The request body (SnapRequest) says
// what is asked:
//
//	(empty)                                 the whole snapshot
//	{"window":N}                            N ≥ 1: a windowed snapshot
//	{"page":{"before":"<id>","limit":K}}    K ≥ 1: a page of messages;
//	                                        before absent: the newest K
//
// The owner of partition p replies, between two batches of that partition,
// with:
//
//	Tc-Seq: S   (header) the seq the view reflects; 0 for a thread never seen
//	body: {"tenant":..,"thread":..,"seq":S,"status":"..","found":true,
//	       "window":N,                      // windowed snapshots only
//	       "view":{reducer view document},  // windowed: AppendWindowView
//	       "events":[MESSAGES_SNAPSHOT, STATE_SNAPSHOT, ...]}  // AG-UI snapshot events
//
// A windowed snapshot holds the newest N messages (widened back to the
// oldest message an open item lives in), the state, the newest N runs and
// the open items: reducer.AppendWindowView and AppendWindowSnapshotEvents.
// Its view says where the messages start (messagesFrom) and how many the
// thread has (messageCount); the messages before messagesFrom are read page
// by page. A page reply is:
//
//	body: {"tenant":..,"thread":..,"seq":S,"status":"..","found":true,
//	       "messages":[AG-UI messages, oldest first],
//	       "first":i,"end":e,"total":n,     // the messages [i, e) of n
//	       "before":"<id>"}                 // the next older page's cursor;
//	                                        // absent when i == 0
//
// A page's before that names no message of the thread is answered with
// Tc-Error-Kind "no-message". Requests for one thread are coalesced per body:
// one encoding answers every request with the same body in the queue.
//
// On error the reply has Tc-Error-Kind and Tc-Error headers and an empty
// body (kind "unsent": the reply could not be sent; the request may be
// retried). Joining with no gap: subscribe to the view subject, then request the
// snapshot (S), drop frames with Seq ≤ S; the first frame kept has Prev == S
// (frames are dense), otherwise resynchronise. A windowed snapshot joins the
// same way: the frames after it are the same frames.

// Frame is a decoded view frame. The Raw fields alias the parsed buffer.
type Frame struct {
	Tenant  string            `json:"tenant"`
	Thread  string            `json:"thread"`
	Seq     uint64            `json:"seq"`
	Prev    uint64            `json:"prev"`
	Status  string            `json:"status,omitempty"`
	Events  []json.RawMessage `json:"events"`
	Changes json.RawMessage   `json:"changes,omitempty"`
}

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

// PageRequest asks for the Limit messages before the message Before (the
// newest Limit when Before is "").
type PageRequest struct {
	Before string `json:"before,omitempty"`
	Limit  int    `json:"limit"`
}

// ErrBadRequest is wrapped by ParseSnapRequest's errors.
var ErrBadRequest = errors.New("pipeline: bad snapshot request")

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

// Page is a decoded page reply. Messages alias the parsed buffer.
type Page struct {
	Tenant   string            `json:"tenant"`
	Thread   string            `json:"thread"`
	Seq      uint64            `json:"seq"`
	Status   string            `json:"status,omitempty"`
	Found    bool              `json:"found"`
	Messages []json.RawMessage `json:"messages"`
	First    int               `json:"first"`
	End      int               `json:"end"`
	Total    int               `json:"total"`
	Before   string            `json:"before,omitempty"`
}

// ParsePage decodes a page reply, returning the error a failed reply
// carries in its headers.
func ParsePage(msg *nats.Msg) (Page, error) {
	if kind := msg.Header.Get(HeaderErrorKind); kind != "" {
		return Page{}, fmt.Errorf("pipeline: page failed: %s: %s", kind, msg.Header.Get(HeaderError))
	}
	var p Page
	if err := json.Unmarshal(msg.Data, &p); err != nil {
		return Page{}, fmt.Errorf("pipeline: bad page: %w", err)
	}
	return p, nil
}

// ParseFrame decodes a frame message's body. It is a convenience for tests
// and tools (encoding/json); a hot consumer may scan the body itself.
func ParseFrame(data []byte) (Frame, error) {
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("pipeline: bad frame: %w", err)
	}
	return f, nil
}

// ParseSnapshot decodes a snapshot reply, returning the error a failed
// reply carries in its headers.
func ParseSnapshot(msg *nats.Msg) (Snapshot, error) {
	if kind := msg.Header.Get(HeaderErrorKind); kind != "" {
		return Snapshot{}, fmt.Errorf("pipeline: snapshot failed: %s: %s", kind, msg.Header.Get(HeaderError))
	}
	var s Snapshot
	if err := json.Unmarshal(msg.Data, &s); err != nil {
		return Snapshot{}, fmt.Errorf("pipeline: bad snapshot: %w", err)
	}
	return s, nil
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // escapes exactly as JSON requires; never fails for a string
	return append(dst, b...)
}
