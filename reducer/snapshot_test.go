package reducer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// splitJSONL splits AppendSnapshotEvents output into events.
func splitJSONL(t *testing.T, b []byte) []json.RawMessage {
	t.Helper()
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("snapshot events do not end with a newline: %q", b)
	}
	var out []json.RawMessage
	for _, line := range bytes.Split(b[:len(b)-1], []byte{'\n'}) {
		if !json.Valid(line) {
			t.Fatalf("snapshot event is not JSON: %s", line)
		}
		out = append(out, json.RawMessage(line))
	}
	return out
}

// TestSnapshotEventsLateJoiner checks, for every corpus stream and every
// point k the stream is still accepted at, that a fresh consumer fed the
// snapshot events taken after k events and then the live events from k on
// accepts them all and ends with the same messages and state (and the same
// verdict) as a consumer that saw the whole stream.
func TestSnapshotEventsLateJoiner(t *testing.T) {
	for _, s := range corpusStreams(t) {
		t.Run(strings.TrimSuffix(s.name, ".json"), func(t *testing.T) {
			full := &corpusRun{thread: s.start(t), fatalIdx: -1, proto: s.proto}
			feedRange(full, s.events, 0, len(s.events))
			for k := 0; k <= len(s.events); k++ {
				prefix := &corpusRun{thread: s.start(t), fatalIdx: -1, proto: s.proto}
				if !feedRange(prefix, s.events, 0, k) {
					break
				}
				snap := splitJSONL(t, prefix.thread.AppendSnapshotEvents(nil))
				stream := append(append([]json.RawMessage{}, snap...), s.events[k:]...)
				joiner := &corpusRun{thread: NewThread("joiner"), fatalIdx: -1, proto: s.proto}
				feedRange(joiner, stream, 0, len(stream))
				if joiner.fatalIdx >= 0 && joiner.fatalIdx < len(snap) {
					t.Fatalf("k=%d: joiner rejected snapshot event %d (%s): %v", k, joiner.fatalIdx,
						snap[joiner.fatalIdx], joiner.fatal)
				}
				wantFatal := full.fatalIdx
				gotFatal := -1
				if joiner.fatalIdx >= 0 {
					gotFatal = joiner.fatalIdx - len(snap) + k
				}
				if gotFatal != wantFatal {
					t.Fatalf("k=%d: joiner fatal at original event %d (%v), full stream at %d (%v)\nsnapshot:\n%s",
						k, gotFatal, joiner.fatal, wantFatal, full.fatal, prefix.thread.AppendSnapshotEvents(nil))
				}
				jsonEqual(t, "messages", joiner.thread.AppendMessages(nil), full.thread.AppendMessages(nil))
				jsonEqual(t, "state", joiner.thread.AppendState(nil), full.thread.AppendState(nil))
				if t.Failed() {
					t.Fatalf("k=%d; snapshot:\n%s", k, prefix.thread.AppendSnapshotEvents(nil))
				}
			}
		})
	}
}

// TestSnapshotTerminals: with no run active, the snapshot restates how the
// last run ended, so that the next live RUN_STARTED (and, after
// RUN_FINISHED, a late RUN_ERROR) is accepted by the joiner.
func TestSnapshotTerminals(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantLast string // type of the snapshot's last event
		next     string // a live event the joiner must accept
	}{
		{"no run yet", nil, "RUN_FINISHED", vRS},
		{"finished with outcome", []string{vRS, `{"type":"RUN_FINISHED","threadId":"t","runId":"r1","outcome":{"type":"cancelled"}}`},
			"RUN_FINISHED", `{"type":"RUN_ERROR","message":"late"}`},
		{"producer error", []string{vRS, `{"type":"RUN_ERROR","message":"boom","code":"E"}`}, "RUN_ERROR", vRS2},
		{"rejected", []string{vRS, `{"type":"STEP_FINISHED","stepName":"x"}`}, "RUN_ERROR", vRS2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := NewThread("t")
			for i, l := range tt.give {
				applyLine(t, src, uint64(i+1), l)
			}
			snap := splitJSONL(t, src.AppendSnapshotEvents(nil))
			var last struct {
				Type string
				Code string
			}
			mustUnmarshal(t, snap[len(snap)-1], &last)
			if last.Type != tt.wantLast {
				t.Fatalf("last snapshot event %s, want %s", snap[len(snap)-1], tt.wantLast)
			}
			if tt.name == "rejected" && last.Code != RejectedCode {
				t.Fatalf("rejected run restated with code %q", last.Code)
			}
			joiner := &corpusRun{thread: NewThread("j"), fatalIdx: -1}
			stream := append(append([]json.RawMessage{}, snap...), json.RawMessage(tt.next))
			if !feedRange(joiner, stream, 0, len(stream)) {
				t.Fatalf("joiner rejected event %d: %v", joiner.fatalIdx, joiner.fatal)
			}
		})
	}
}
