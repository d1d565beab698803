package wire

import (
	"encoding/json"
	"fmt"
)

// The format of view frames and snapshot replies. fanout parses
// these; ingest produces them. Both are core NATS messages (not stored):
// the event log is the durable record, and a subscriber that misses a frame
// notices (Tc-Prev) and takes a snapshot.
//
// # Size
//
// Neither has a size limit of its own. A frame, a snapshot reply, a tap
// message or a dead letter larger than one NATS message (the connection's
// max payload, less 4 KiB for headers) is sent in parts (parts.go):
// consecutive messages on the same subject carrying every header below
// plus Tc-Part: i/n and Tc-Part-Bytes, whose bodies joined in order are
// the body described here. A receiver joins them (Assembler) and
// never sees part of a frame: a frame that lost a part is a lost frame,
// which the next frame's Tc-Prev reveals. A snapshot reply larger than a
// window (pipeline.Config.ReplyWindow) is sent one window at a time, as the
// requester asks (Request, Responder: Tc-Part-More), so that the
// server never buffers more than a window of it for the requester. Small
// messages — nearly all — are sent whole: one message, no part header.
// The limits that remain are pipeline.Config.MaxMsgSize (one stored
// message, so one event) and pipeline.Config.MaxViewBytes (one thread's view).
//
// # Frame — subject view.<tenant>.<thread token>
//
// Headers:
//
//	Tc-Seq:    S   the stream sequence the thread's view reflects after this frame
//	Tc-Prev:   P   the Tc-Seq of the thread's previous frame (0: none since the
//	               thread was created or reloaded from nothing)
//	Tc-Status: st  the body's "status", for readers of the headers alone
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
//	"status":"..", "runs":[..], "steps":[..], "subagents":[..], "error":..,
//	                     // runs, steps or subagents changed: the view's run-level
//	                     // members restated (reducer.AppendRunMembers)
//	"warnings":n         // the view's new warning count
//
// Consumers also accept "view":{..}: the whole view restated, which
// replaces the document and makes the other members redundant.
//
// Events the reducer refused stay in "events" in their place (folding the
// frame's events refuses them the same way). An event that could not be
// decoded at all has no AG-UI form: its rejection of the run shows only as
// "status":"rejected" and in the changes' "error"; an AG-UI
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

// ParseFrame decodes a frame message's body. It is a convenience for tests
// and tools (encoding/json); a hot consumer may scan the body itself.
func ParseFrame(data []byte) (Frame, error) {
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("wire: bad frame: %w", err)
	}
	return f, nil
}
