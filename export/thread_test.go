package export

import (
	"testing"
	"time"
)

// foldEvents folds one event per stored message, the message at index i
// having seq i+1 and being stored i seconds after t0, in a window that
// holds every seq.
func foldEvents(t *testing.T, id string, events ...string) *threadFold {
	t.Helper()
	f := newThreadFold("acme", id, window{1, uint64(len(events))})
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, ev := range events {
		f.apply(uint64(i+1), t0.Add(time.Duration(i)*time.Second), []byte(ev))
	}
	return f
}

// TestToolCallFromSnapshotAnsweredLater: a call known only from a
// MESSAGES_SNAPSHOT has no event of its own, so its row takes its
// message's first seq, time and run (docs/export.md), even when a
// TOOL_CALL_RESULT of a later run answers it; the result moves only its
// last seq.
func TestToolCallFromSnapshotAnsweredLater(t *testing.T) {
	f := foldEvents(t, "t1",
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a1","role":"assistant","content":"calling","toolCalls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]}]}`,
		`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`,
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r2"}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"c1","content":"found"}`,
		`{"type":"RUN_FINISHED","threadId":"t1","runId":"r2"}`,
	)
	msgs, calls, err := f.rows()
	if err != nil {
		t.Fatal(err)
	}
	var parent *MessageRow
	for i := range msgs {
		if msgs[i].MessageID == "a1" {
			parent = &msgs[i]
		}
	}
	if parent == nil || len(calls) != 1 {
		t.Fatalf("messages %+v, calls %+v", msgs, calls)
	}
	c := calls[0]
	if c.FirstSeq != parent.FirstSeq || c.FirstAt != parent.FirstAt {
		t.Errorf("call c1: first seq %d at %d; its message's is %d at %d", c.FirstSeq, c.FirstAt, parent.FirstSeq, parent.FirstAt)
	}
	if c.RunID == nil || *c.RunID != "r1" {
		t.Errorf("call c1: run %v, want r1 (the run of its message)", deref(c.RunID))
	}
	if c.LastSeq != 5 || c.Result == nil || *c.Result != "found" {
		t.Errorf("call c1: last seq %d, result %v; want 5, found", c.LastSeq, deref(c.Result))
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
