package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
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
// everything was written (subscriber.idle).

// runState is what a sequence of events leaves of the run lifecycle.
type runState struct {
	changed bool   // the events contain a run lifecycle event
	open    string // after them: the open run's id, or "" when none is open
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

// runEvent returns an event's type and, for a run event, its runId. It
// stops scanning once the type shows the event is not a run event, so a
// MESSAGES_SNAPSHOT of a long thread (tens of megabytes, its type first,
// as the codec writes it) costs a few bytes, not a parse.
func runEvent(ev []byte) (typ, runID string, ok bool) {
	var idRaw []byte
	err := scanObject(ev, func(name, v []byte) error {
		switch string(name) {
		case "type":
			typ = unquoted(v)
			if !strings.HasPrefix(typ, "RUN_") {
				return errStop
			}
		case "runId":
			idRaw = v
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) || typ == "" {
		return "", "", false
	}
	if idRaw != nil && json.Unmarshal(idRaw, &runID) != nil {
		return "", "", false
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
	if !sn.runDone {
		sn.run, sn.runDone = runOf(sn.events), true
	}
	s.run = sn.run.open
	return sn.enc[v], true
}

// idle reports whether the subscriber's client has no run open and nothing
// is queued for it: where a POSTed AG-UI stream ends.
func (s *subscriber) idle() bool {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stLive && s.run == "" && len(s.queue) == 0 && s.resync == ""
}
