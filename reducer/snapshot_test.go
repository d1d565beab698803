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
