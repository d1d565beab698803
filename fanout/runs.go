package fanout

import "encoding/json"

// NOTE: keeping an agui stream a valid AG-UI stream across a resync.
//
// A subscriber that joins gets the pipeline's snapshot events, which open
// the thread's current run (RUN_STARTED) before restating messages, state
// and activities, so the stream is valid from its first event. A subscriber
// resynchronised mid-stream (overflow, gap) already has a run open or
// closed on its side. The hub tracks, per agui subscriber, the run its
// client has open (from the run events it was sent), and splices the
// snapshot in only when that is valid:
//
//   - the client has no run open: the snapshot events as they are;
//   - the client has run r open and the snapshot opens the same r: the
//     snapshot without its RUN_STARTED (snapshots are valid inside a run);
//   - otherwise (r ended, or another run began, during the gap): nothing
//     valid can be said — AG-UI forbids inventing RUN_FINISHED — so the
//     stream ends (EndResync) and the client reconnects to a fresh one.

// runState is what a sequence of events leaves of the run lifecycle.
type runState struct {
	changed bool   // the events contain a run lifecycle event
	open    string // after them: the open run's id, or "" when none is open
}

// runOf scans events for RUN_STARTED / RUN_FINISHED / RUN_ERROR.
func runOf(events []json.RawMessage) runState {
	var st runState
	for _, ev := range events {
		var e struct {
			Type  string `json:"type"`
			RunID string `json:"runId"`
		}
		if json.Unmarshal(ev, &e) != nil {
			continue
		}
		switch e.Type {
		case "RUN_STARTED":
			st = runState{changed: true, open: e.RunID}
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
	var e struct {
		Type  string `json:"type"`
		RunID string `json:"runId"`
	}
	if json.Unmarshal(events[0], &e) != nil || e.Type != "RUN_STARTED" {
		return "", false
	}
	return e.RunID, true
}

// frameRun returns fr's run effect, computed once (under the feed lock).
func frameRun(fr *frame) runState {
	if !fr.runDone {
		fr.run, fr.runDone = runOf(fr.events), true
	}
	return fr.run
}

// snapshotFor returns the wire messages that resynchronise s to sn, and
// false when no valid splice exists (see the NOTE). Called with feed.mu held.
func snapshotFor(s *Subscriber, sn *snapshot, join bool) ([][]byte, bool) {
	v := s.variant
	if v.ViewMode() {
		return sn.encoded(v, false), true
	}
	st := runOf(sn.events)
	if join || s.run == "" {
		s.run = st.open
		return sn.encoded(v, false), true
	}
	if id, ok := firstRunStarted(sn.events); ok && id == s.run {
		s.run = st.open
		return sn.encoded(v, true), true
	}
	return nil, false
}

// encoded returns the snapshot's messages in variant v, without its first
// event when skipFirst; each form is encoded once and shared.
func (sn *snapshot) encoded(v Variant, skipFirst bool) [][]byte {
	if !skipFirst {
		if sn.enc[v] == nil {
			sn.enc[v] = encodeSnapshot(sn, v)
		}
		return sn.enc[v]
	}
	if sn.encSkip[v] == nil {
		cut := *sn
		cut.events = sn.events[1:]
		sn.encSkip[v] = encodeSnapshot(&cut, v)
	}
	return sn.encSkip[v]
}
