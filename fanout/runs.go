package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
)

// NOTE: keeping an agui stream a valid AG-UI stream.
//
// A subscriber that joins gets the pipeline's snapshot events
// (reducer.AppendSnapshotEvents): RUN_STARTED, the open subagents, steps and
// items re-opened, MESSAGES_SNAPSHOT, STATE_SNAPSHOT, and — when no run is
// active — the last run's terminal event. That is a valid stream for a fresh
// consumer only: spliced into a live stream it would start open items and
// steps a second time, and MESSAGES_SNAPSHOT cannot remove reasoning or
// activity messages the consumer holds. So an agui subscriber that must be
// resynchronised after its join (queue overflow, gap) is not: its stream
// ends with its cursor (EndResync), and the client reconnects — resuming
// from the node's ring when it still covers the cursor (no snapshot at
// all), else starting a fresh stream with a fresh snapshot. View-mode
// subscribers are resynchronised in place: a view document replaces
// everything.
//
// The hub also tracks the run each agui client has open, from the run
// events it was sent, so that a POSTed stream (an AG-UI HttpAgent, which
// waits for the response to end) can end once no run is open and
// everything was written (subscriber.idle). A client that resumes from a
// cursor was sent the events before it on an earlier stream: the feed
// keeps the run open before each frame of its ring (frame.runBefore), so
// the resumed stream starts with the run the client has open. Where the
// feed does not know it (its first frame came before any snapshot, or
// after a gap, and no run event since), the stream does not end as idle
// before a run event tells.

// runState is what a sequence of events leaves of the run lifecycle.
type runState struct {
	changed bool   // the events contain a run lifecycle event
	open    string // after them: the open run's id, or "" when none is open
}

// openRun is the run open at a position of a thread.
type openRun struct {
	id    string // the open run's id, "" when none is open
	known bool   // false: not known, the events before the position were not seen
}

// after returns the run open after events whose effect is st.
func (o openRun) after(st runState) openRun {
	if st.changed {
		return openRun{id: st.open, known: true}
	}
	return o
}

// runOf scans events for RUN_STARTED / RUN_FINISHED / RUN_ERROR.
func runOf(events []json.RawMessage) runState {
	var st runState
	for _, ev := range events {
		typ, runID, ok := runEvent(ev)
		if !ok {
			continue
		}
		switch typ {
		case "RUN_STARTED":
			st = runState{changed: true, open: runID}
		case "RUN_FINISHED", "RUN_ERROR":
			st = runState{changed: true}
		}
	}
	return st
}

// firstRunStarted returns the runId of events[0] when it is RUN_STARTED.
func firstRunStarted(events []json.RawMessage) (string, bool) {
	if len(events) == 0 {
		return "", false
	}
	typ, runID, ok := runEvent(events[0])
	if !ok || typ != "RUN_STARTED" {
		return "", false
	}
	return runID, true
}

// errStop ends a scan early (runEvent).
var errStop = errors.New("stop")

// runEvent returns a run event's type and runId; ok is false for any
// other event. It stops scanning once the type shows the event is not a
// run event, so a MESSAGES_SNAPSHOT of a long thread (tens of megabytes,
// its type first, as the codec writes it) costs a few bytes, not a parse,
// and allocates nothing: every frame's events are scanned (onMsg).
func runEvent(ev []byte) (typ, runID string, ok bool) {
	var typRaw, idRaw []byte
	err := scanObject(ev, func(name, v []byte) error {
		switch string(name) {
		case "type":
			if !bytes.HasPrefix(v, []byte(`"RUN_`)) {
				return errStop
			}
			typRaw = v
		case "runId":
			idRaw = v
		}
		return nil
	})
	if err != nil || typRaw == nil {
		return "", "", false
	}
	if typ = unquoted(typRaw); typ == "" {
		return "", "", false
	}
	if idRaw != nil {
		var id string
		if json.Unmarshal(idRaw, &id) != nil {
			return "", "", false
		}
		runID = id
	}
	return typ, runID, true
}

// unquoted returns the JSON string v without its quotes, or "" when it is
// not a string without escapes (event type names never have any).
func unquoted(v []byte) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return ""
	}
	return string(v[1 : len(v)-1])
}

// frameRun returns fr's run effect, computed once (under the feed lock).
func frameRun(fr *frame) runState {
	if !fr.runDone {
		fr.run, fr.runDone = runOf(fr.events), true
	}
	return fr.run
}

// snapshotRun returns the run open at sn: its events restate the thread
// for a fresh consumer, the run lifecycle included. Called with feed.mu
// held.
func snapshotRun(sn *snapshot) openRun {
	if !sn.runDone {
		sn.run, sn.runDone = runOf(sn.events), true
	}
	return openRun{id: sn.run.open, known: true}
}

// snapshotFor returns the wire messages that bring s to sn, and false when
// no valid splice exists (an agui resync: see the NOTE). Called with
// feed.mu held.
func snapshotFor(s *subscriber, sn *snapshot, join bool) ([][]byte, bool) {
	v := s.variant
	if sn.enc[v] == nil {
		sn.enc[v] = encodeSnapshot(sn, v)
	}
	if v.ViewMode() {
		return sn.enc[v], true
	}
	if !join {
		return nil, false
	}
	s.run = snapshotRun(sn)
	return sn.enc[v], true
}

// idle reports whether the subscriber's client has no run open (known to
// have none) and nothing is queued for it: where a POSTed AG-UI stream
// ends.
func (s *subscriber) idle() bool {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stLive && s.run.known && s.run.id == "" && len(s.queue) == 0 && s.resync == ""
}
