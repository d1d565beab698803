package reducer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// viewClient is a "view mode" subscriber that keeps messages and state from
// the first AppendView and then only from Flush changes, the way the fanout
// is meant to.
type viewClient struct {
	msgs  [][]byte
	state *jsondoc.Doc
	run   map[string]json.RawMessage // the run-level members (AppendRunMembers)
}

func newViewClient(t *testing.T, thr *Thread) *viewClient {
	c := &viewClient{}
	c.reload(t, thr)
	c.setRun(t, thr)
	var err error
	if c.state, err = jsondoc.Parse(thr.AppendState(nil)); err != nil {
		t.Fatal(err)
	}
	return c
}

// setRun takes the run-level members as a change document restates them.
func (c *viewClient) setRun(t *testing.T, thr *Thread) {
	t.Helper()
	c.run = nil
	mustUnmarshal(t, append(append([]byte{'{'}, thr.AppendRunMembers(nil)...), '}'), &c.run)
}

func (c *viewClient) reload(t *testing.T, thr *Thread) {
	c.msgs = c.msgs[:0]
	for i := 0; i < thr.MessageCount(); i++ {
		c.msgs = append(c.msgs, thr.AppendMessageAt(nil, i))
	}
}

// apply folds one Changes into the client, using only what Changes names.
func (c *viewClient) apply(t *testing.T, thr *Thread, ch *Changes) {
	t.Helper()
	if ch.Structural {
		c.reload(t, thr)
	}
	for _, mc := range ch.Messages {
		switch mc.Kind {
		case Added:
			if mc.Index != len(c.msgs) {
				t.Fatalf("added message at %d, client holds %d", mc.Index, len(c.msgs))
			}
			c.msgs = append(c.msgs, thr.AppendMessageAt(nil, mc.Index))
		case Replaced:
			c.msgs[mc.Index] = thr.AppendMessageAt(nil, mc.Index)
		case Appended:
			// Concatenate as JavaScript strings do (WTF-8 here), so that a
			// surrogate pair split across two flushes re-joins.
			var m map[string]json.RawMessage
			mustUnmarshal(t, c.msgs[mc.Index], &m)
			old := codec.AppendUnquotedRaw(nil, m["content"])
			if len(old) != mc.TextFrom {
				t.Fatalf("append from %d, client content has %d bytes", mc.TextFrom, len(old))
			}
			text := codec.AppendUnquotedRaw(old, thr.AppendTextFrom(nil, mc.Index, mc.TextFrom))
			m["content"] = codec.AppendViewString(nil, text)
			b, _ := json.Marshal(m)
			c.msgs[mc.Index] = b
		}
	}
	if ch.Runs {
		c.setRun(t, thr)
	}
	switch ch.State {
	case StateReplaced:
		if err := c.state.Set(thr.AppendState(nil)); err != nil {
			t.Fatal(err)
		}
	case StateDelta:
		for _, ops := range ch.StateOps {
			var dec codec.Decoder
			var ev codec.Event
			if err := dec.Decode([]byte(`{"type":"STATE_DELTA","delta":`+string(ops)+`}`), &ev); err != nil {
				t.Fatalf("journal ops do not decode: %v: %s", err, ops)
			}
			if err := c.state.Apply(ev.Patch); err != nil {
				t.Fatalf("journal ops do not apply on the client: %v", err)
			}
		}
	}
}

func (c *viewClient) check(t *testing.T, thr *Thread, where string) {
	t.Helper()
	got := []byte("[" + string(joinBytes(c.msgs)) + "]")
	jsonEqual(t, where+": messages", got, thr.AppendMessages(nil))
	jsonEqual(t, where+": state", c.state.AppendJSON(nil), thr.AppendState(nil))
	// The run-level members held equal the whole view's.
	var view map[string]json.RawMessage
	mustUnmarshal(t, thr.AppendView(nil), &view)
	for k, v := range c.run {
		jsonEqual(t, where+": "+k, v, view[k])
	}
	if len(c.run) != 5 {
		t.Errorf("%s: %d run-level members, want 5 (status, runs, steps, subagents, error)", where, len(c.run))
	}
	if t.Failed() {
		t.FailNow()
	}
}

func joinBytes(bs [][]byte) []byte {
	var out []byte
	for i, b := range bs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return out
}

// TestJournalRebuildsView follows every corpus stream with a view-mode
// client flushing after every event, and every 3 events: the client must
// always hold exactly the Thread's messages, state and run-level members
// (status, runs, steps, subagents, error), re-reading the latter only when
// Changes.Runs says so.
func TestJournalRebuildsView(t *testing.T) {
	for _, every := range []int{1, 3} {
		for _, s := range corpusStreams(t) {
			t.Run(strings.TrimSuffix(s.name, ".json")+"/every-"+itoa(every), func(t *testing.T) {
				thr := s.start(t)
				thr.Flush()
				client := newViewClient(t, thr)
				out := &corpusRun{thread: thr, fatalIdx: -1, proto: s.proto}
				for i := range s.events {
					ok := feedRange(out, s.events, i, i+1)
					if (i+1)%every == 0 || !ok || i == len(s.events)-1 {
						client.apply(t, thr, thr.Flush())
						client.check(t, thr, "after event "+itoa(i))
					}
					if !ok {
						break
					}
				}
			})
		}
	}
}

func TestJournalKinds(t *testing.T) {
	thr := NewThread("t")
	for i, l := range []string{vRS,
		`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ab"}`} {
		applyLine(t, thr, uint64(i+1), l)
	}
	ch := thr.Flush()
	if ch.Structural || len(ch.Messages) != 1 || ch.Messages[0].Kind != Added || !ch.Runs {
		t.Fatalf("first flush: %+v", ch)
	}
	applyLine(t, thr, 4, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"cd"}`)
	applyLine(t, thr, 5, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ef"}`)
	applyLine(t, thr, 6, `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`)
	ch = thr.Flush()
	if len(ch.Messages) != 1 || ch.Messages[0] != (MessageChange{Index: 0, Kind: Appended, TextFrom: 2}) ||
		ch.State != StateDelta || len(ch.StateOps) != 1 || ch.Runs || ch.Warnings {
		t.Fatalf("second flush: %+v", ch)
	}
	if got := string(thr.AppendTextFrom(nil, 0, 2)); got != `"cdef"` {
		t.Fatalf("AppendTextFrom = %s", got)
	}
	applyLine(t, thr, 7, `{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"k":1}}`)
	applyLine(t, thr, 8, `{"type":"STATE_SNAPSHOT","snapshot":[]}`)
	ch = thr.Flush()
	if len(ch.Messages) != 1 || ch.Messages[0].Kind != Replaced || ch.State != StateReplaced || len(ch.StateOps) != 0 {
		t.Fatalf("third flush: %+v", ch)
	}
	if ch = thr.Flush(); !ch.Empty() {
		t.Fatalf("empty flush: %+v", ch)
	}
}

func TestJournalBounded(t *testing.T) {
	thr := NewThread("t")
	applyLine(t, thr, 1, vRS)
	thr.Flush()
	seq := uint64(2)
	for i := 0; i < maxJournalMessages+10; i++ {
		id := `"m` + itoa(i) + `"`
		applyLine(t, thr, seq, `{"type":"TEXT_MESSAGE_START","messageId":`+id+`}`)
		applyLine(t, thr, seq+1, `{"type":"TEXT_MESSAGE_END","messageId":`+id+`}`)
		seq += 2
	}
	big := `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/x","value":"` + strings.Repeat("x", maxJournalOpBytes/2) + `"}]}`
	for i := 0; i < 3; i++ {
		applyLine(t, thr, seq, big)
		seq++
	}
	ch := thr.Flush()
	if !ch.Structural || len(ch.Messages) != 0 || ch.State != StateReplaced || len(ch.StateOps) != 0 {
		t.Fatalf("journal did not degrade: structural %v, %d messages, state %v, %d ops",
			ch.Structural, len(ch.Messages), ch.State, len(ch.StateOps))
	}
}

// TestJournalSplitSurrogate: an astral character split across two deltas,
// with a flush between them, re-joins on a client that concatenates.
func TestJournalSplitSurrogate(t *testing.T) {
	thr := NewThread("t")
	applyLine(t, thr, 1, vRS)
	applyLine(t, thr, 2, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`)
	applyLine(t, thr, 3, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\ud83d"}`)
	thr.Flush()
	client := newViewClient(t, thr)
	applyLine(t, thr, 4, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\ude00b"}`)
	client.apply(t, thr, thr.Flush())
	client.check(t, thr, "after the second half")
	jsonEqual(t, "content", thr.AppendMessages(nil), []byte(`[{"id":"m","role":"assistant","content":"a😀b"}]`))
}
