package reducer

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// FuzzApply drives the Thread with event sequences built from the fuzzer's
// bytes over a small vocabulary of ids and owners, so that collisions
// (reopens, wrong owners, dropped targets, nested runs) are frequent. Every
// event is a valid event for the codec; the sequence is anything. It checks:
// no panic; the index invariants of Thread; the view is JSON; a checkpoint
// taken at a fuzzer-chosen point and continued gives the same view and
// ViewSize; MemSize and ViewSize measured incrementally equal a full
// measure; and the snapshot events rebuild the final messages and state on
// a fresh Thread.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 3, 4, 5, 1}, byte(2))
	f.Add([]byte{0, 6, 6, 10, 10, 17, 1, 0, 21, 2, 0, 26, 6, 27, 1}, byte(5))
	f.Add([]byte{0, 22, 23, 23, 21, 7, 8, 11, 9, 18, 20, 19, 20, 1}, byte(9))
	f.Add([]byte{0, 26, 26, 24, 25, 12, 14, 15, 16, 13, 28, 1, 2}, byte(0))
	f.Fuzz(func(t *testing.T, prog []byte, split byte) {
		if len(prog) > 400 {
			prog = prog[:400]
		}
		lines := fuzzEvents(prog)
		var evs []*codec.Event
		var dec codec.Decoder
		var ev codec.Event
		for _, l := range lines {
			if err := dec.Decode([]byte(l), &ev); err != nil {
				t.Fatalf("generator made an event the codec refuses: %v\n%s", err, l)
			}
			evs = append(evs, ev.Clone())
		}
		k := 0
		if len(evs) > 0 {
			k = int(split) % (len(evs) + 1)
		}
		thr := NewThread("t")
		thr.Flush()
		client := newViewClient(t, thr)
		var restored *Thread
		for i, e := range evs {
			if i == k {
				var err error
				if restored, err = LoadCheckpoint(thr.AppendCheckpoint(nil)); err != nil {
					t.Fatalf("LoadCheckpoint at %d: %v", k, err)
				}
			}
			thr.Apply(uint64(i+1), e)
			if restored != nil {
				restored.Apply(uint64(i+1), e)
			}
			checkInvariants(t, thr)
			if i%3 == 2 {
				client.apply(t, thr, thr.Flush())
			}
		}
		client.apply(t, thr, thr.Flush())
		client.check(t, thr, "journal client")
		if got, gotView := thr.MemSize(), thr.ViewSize(); true {
			thr.j.memAll, thr.j.viewStateOK = true, false
			if want, wantView := thr.MemSize(), thr.ViewSize(); got != want || gotView != wantView {
				t.Fatalf("incremental MemSize %d and ViewSize %d, full %d and %d", got, gotView, want, wantView)
			}
		}
		if restored != nil && restored.ViewSize() != thr.ViewSize() {
			t.Fatalf("checkpoint at %d then replay: ViewSize %d, live %d", k, restored.ViewSize(), thr.ViewSize())
		}
		view := thr.AppendView(nil)
		if !json.Valid(view) {
			t.Fatalf("view is not JSON: %s", view)
		}
		if restored != nil && !bytes.Equal(restored.AppendView(nil), view) {
			t.Fatalf("checkpoint at %d then replay differs\ngot  %s\nwant %s", k, restored.AppendView(nil), view)
		}
		joiner := NewThread("j")
		snap := thr.AppendSnapshotEvents(nil)
		stateSeen := false
		for i, l := range bytes.Split(bytes.TrimSuffix(snap, []byte("\n")), []byte("\n")) {
			if err := dec.Decode(l, &ev); err != nil {
				t.Fatalf("snapshot event %d does not decode: %v\n%s", i, err, l)
			}
			res := joiner.Apply(uint64(i+1), &ev)
			// The one documented edge (snapshot.go): a span or chunk lane
			// whose opener's tag disagrees with the owner the restated
			// message establishes cannot be reopened; it is rejected as
			// S7, after messages and state are complete.
			if res.Fatal != nil && !(stateSeen && errors.Is(res.Fatal, &ProtocolError{Code: "S7"})) {
				t.Fatalf("snapshot event %d rejected: %v\n%s", i, res.Fatal, snap)
			}
			if res.Fatal != nil {
				break
			}
			stateSeen = stateSeen || ev.Type == codec.TypeStateSnapshot
		}
		jsonEqual(t, "joiner messages", joiner.AppendMessages(nil), thr.AppendMessages(nil))
		jsonEqual(t, "joiner state", joiner.AppendState(nil), thr.AppendState(nil))
	})
}

// checkInvariants verifies the Thread's documented index invariants.
func checkInvariants(t *testing.T, thr *Thread) {
	t.Helper()
	first := map[string]*message{}
	firstCall := map[string]*toolCall{}
	for i, m := range thr.msgs {
		if m.idx != i {
			t.Fatalf("msgs[%d].idx = %d", i, m.idx)
		}
		if _, ok := first[m.id]; !ok {
			first[m.id] = m
		}
		for _, c := range m.toolCalls {
			if c.msg != m {
				t.Fatalf("tool call %q points to the wrong message", c.id)
			}
			if _, ok := firstCall[c.id]; !ok {
				firstCall[c.id] = c
			}
		}
	}
	if len(first) != thr.byID.len() || len(firstCall) != thr.calls.len() {
		t.Fatalf("index sizes: byID %d want %d, calls %d want %d", thr.byID.len(), len(first), thr.calls.len(), len(firstCall))
	}
	for id, m := range first {
		if thr.byID.at(id) != m {
			t.Fatalf("byID[%q] is not the first message with that id", id)
		}
	}
	for id, c := range firstCall {
		if thr.calls.at(id) != c {
			t.Fatalf("calls[%q] is not the first call with that id", id)
		}
	}
	checkCaches(t, thr)
}

// checkCaches asserts what the lookup caches of machine claim (machine.hot,
// machine.hotCall): a cached item is open, its recorded owner is the cached
// one, and the index maps its id to the cached message or call.
func checkCaches(t *testing.T, thr *Thread) {
	t.Helper()
	m := &thr.m
	for i, h := range m.hot {
		if h.kind == 0 {
			continue
		}
		open, own := &m.openText, &m.ownText
		if h.kind == laneReasoning {
			open, own = &m.openReason, &m.ownReason
		}
		if !open.has(h.id) {
			t.Fatalf("hot[%d] caches %q, which is not open", i, h.id)
		}
		if rec, ok := own.get(h.id); !ok || rec != h.owner {
			t.Fatalf("hot[%d] caches %q owned by %v; recorded %v (%v)", i, h.id, h.owner, rec, ok)
		}
		if thr.byID.at(h.id) != h.msg || h.msg.role == roleActivity {
			t.Fatalf("hot[%d] caches a message byID does not hold for %q", i, h.id)
		}
	}
	if c := m.hotCall; c.call != nil {
		if !m.openTool.has(c.id) {
			t.Fatalf("hotCall caches %q, which is not open", c.id)
		}
		if rec, ok := m.ownTool.get(c.id); !ok || rec != c.owner {
			t.Fatalf("hotCall caches %q owned by %v; recorded %v (%v)", c.id, c.owner, rec, ok)
		}
		if thr.calls.at(c.id) != c.call {
			t.Fatalf("hotCall caches a call the index does not hold for %q", c.id)
		}
	}
}

// fuzzEvents turns bytes into events: each byte picks an event kind, the
// following bytes (consumed as needed) pick ids, owners and options.
func fuzzEvents(prog []byte) []string {
	g := &fuzzGen{prog: prog}
	var out []string
	for g.more() {
		out = append(out, g.event())
	}
	return out
}

type fuzzGen struct {
	prog []byte
	pos  int
	runs int
}

func (g *fuzzGen) more() bool { return g.pos < len(g.prog) }

func (g *fuzzGen) next() byte {
	if g.pos >= len(g.prog) {
		return 0
	}
	b := g.prog[g.pos]
	g.pos++
	return b
}

func (g *fuzzGen) pick(opts ...string) string { return opts[int(g.next())%len(opts)] }

// tag returns `,"subagentRunId":"..."` or nothing.
func (g *fuzzGen) tag() string {
	switch g.next() % 3 {
	case 1:
		return `,"subagentRunId":"sa0"`
	case 2:
		return `,"subagentRunId":"sa1"`
	}
	return ""
}

func (g *fuzzGen) meta() string {
	if g.next()%4 == 0 {
		return `,"metadata":{"k` + strconv.Itoa(int(g.next()%3)) + `":` + strconv.Itoa(int(g.next())) + `,"n":null}`
	}
	return ""
}

func (g *fuzzGen) opt(field string, vals ...string) string {
	if g.next()%2 == 0 {
		return ""
	}
	return `,"` + field + `":"` + g.pick(vals...) + `"`
}

func (g *fuzzGen) event() string {
	msg := func() string { return `"` + g.pick("m0", "m1", "m2", "c0", "a0") + `"` }
	call := func() string { return `"` + g.pick("c0", "c1", "c2") + `"` }
	act := func() string { return `"` + g.pick("a0", "a1", "m0") + `"` }
	switch g.next() % 31 {
	case 0:
		g.runs++
		return `{"type":"RUN_STARTED","threadId":"t","runId":"r` + strconv.Itoa(g.runs) + `"}`
	case 1:
		return `{"type":"RUN_FINISHED","threadId":"t","runId":"r` + strconv.Itoa(g.runs) + `"` +
			g.pick("", `,"outcome":{"type":"cancelled"}`, `,"result":{"ok":1}`, `,"outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"x"}]}`) + `}`
	case 2:
		return `{"type":"RUN_ERROR","message":"boom"` + g.opt("code", "E1") + `}`
	case 3:
		return `{"type":"TEXT_MESSAGE_START","messageId":` + msg() + g.opt("role", "user", "assistant", "system") + g.opt("name", "n") + g.tag() + g.meta() + `}`
	case 4:
		return `{"type":"TEXT_MESSAGE_CONTENT","messageId":` + msg() + `,"delta":"` + g.pick("a", "\\ud83d", "\\ude00", "é", "") + `"` + g.tag() + g.meta() + `}`
	case 5:
		return `{"type":"TEXT_MESSAGE_END","messageId":` + msg() + g.tag() + g.meta() + `}`
	case 6:
		return `{"type":"TEXT_MESSAGE_CHUNK"` + g.opt("messageId", "m0", "m1", "m2") + g.opt("role", "user", "assistant") + g.opt("delta", "x", "") + g.tag() + g.meta() + `}`
	case 7:
		return `{"type":"TOOL_CALL_START","toolCallId":` + call() + `,"toolCallName":"` + g.pick("f", "g") + `"` + g.opt("parentMessageId", "m0", "m1", "", "u") + g.tag() + g.meta() + `}`
	case 8:
		return `{"type":"TOOL_CALL_ARGS","toolCallId":` + call() + `,"delta":"{"` + g.tag() + g.meta() + `}`
	case 9:
		return `{"type":"TOOL_CALL_END","toolCallId":` + call() + g.tag() + g.meta() + `}`
	case 10:
		return `{"type":"TOOL_CALL_CHUNK"` + g.opt("toolCallId", "c0", "c1") + g.opt("toolCallName", "f", "g") + g.opt("parentMessageId", "m0") + g.opt("delta", "1") + g.tag() + g.meta() + `}`
	case 11:
		return `{"type":"TOOL_CALL_RESULT","messageId":"` + g.pick("t0", "t1", "m0") + `","toolCallId":` + call() +
			`,"content":` + g.pick(`"ok"`, `[{"type":"text","text":"p"}]`) + g.tag() + g.meta() + `}`
	case 12:
		return `{"type":"REASONING_START","messageId":"` + g.pick("r0", "r1") + `"` + g.tag() + `}`
	case 13:
		return `{"type":"REASONING_END","messageId":"` + g.pick("r0", "r1") + `"` + g.tag() + `}`
	case 14:
		return `{"type":"REASONING_MESSAGE_START","messageId":"` + g.pick("r0", "r1", "m0") + `","role":"reasoning"` + g.tag() + g.meta() + `}`
	case 15:
		return `{"type":"REASONING_MESSAGE_CONTENT","messageId":"` + g.pick("r0", "r1", "m0") + `","delta":"t"` + g.tag() + g.meta() + `}`
	case 16:
		return `{"type":"REASONING_MESSAGE_END","messageId":"` + g.pick("r0", "r1", "m0") + `"` + g.tag() + g.meta() + `}`
	case 17:
		return `{"type":"REASONING_MESSAGE_CHUNK"` + g.opt("messageId", "r0", "r1") + g.opt("delta", "d") + g.tag() + g.meta() + `}`
	case 18:
		return `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"` + g.pick("message", "tool-call") + `","entityId":"` +
			g.pick("m0", "c0", "r0", "a0", "zz") + `","encryptedValue":"E` + strconv.Itoa(int(g.next())) + `"` + g.tag() + `}`
	case 19:
		return `{"type":"STATE_SNAPSHOT","snapshot":` + g.pick(`{}`, `{"n":1,"l":[1,2]}`, `null`, `[1]`, `"s"`) + g.tag() + `}`
	case 20:
		return `{"type":"STATE_DELTA","delta":[` + g.pick(`{"op":"add","path":"/n","value":2}`, `{"op":"remove","path":"/n"}`,
			`{"op":"add","path":"/l/-","value":3}`, `{"op":"test","path":"/n","value":1}`, `{"op":"replace","path":"","value":{"n":0}}`,
			`{"op":"move","from":"/n","path":"/m"}`, `{"op":"copy","from":"/l","path":"/k"}`) + `]` + g.tag() + `}`
	case 21:
		return `{"type":"MESSAGES_SNAPSHOT","messages":[` + g.pick(``,
			`{"id":"m0","role":"assistant","content":"restated","subagentRunId":"sa0"}`,
			`{"id":"m1","role":"user","content":[{"type":"text","text":"u"}]},{"id":"zz","role":"system","content":"s"}`,
			`{"id":"a0","role":"activity","activityType":"t","content":{"n":5}}`,
			`{"id":"r0","role":"reasoning","content":"why"},{"id":"x","role":"assistant","toolCalls":[{"id":"c0","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
			`{"id":"t0","role":"tool","toolCallId":"c0","content":"r","error":"e"}`) + `]}`
	case 22:
		return `{"type":"ACTIVITY_SNAPSHOT","messageId":` + act() + `,"activityType":"` + g.pick("t", "u") + `","content":{"n":` +
			strconv.Itoa(int(g.next()%5)) + `}` + g.pick("", `,"replace":false`, `,"replace":true`) + g.tag() + g.meta() + `}`
	case 23:
		return `{"type":"ACTIVITY_DELTA","messageId":` + act() + `,"activityType":"` + g.pick("t", "u") + `","patch":[` +
			g.pick(`{"op":"replace","path":"/n","value":9}`, `{"op":"add","path":"/x","value":[1]}`, `{"op":"remove","path":"/missing"}`) + `]` + g.tag() + g.meta() + `}`
	case 24:
		return `{"type":"STEP_STARTED","stepName":"` + g.pick("x", "y") + `"` + g.tag() + `}`
	case 25:
		return `{"type":"STEP_FINISHED","stepName":"` + g.pick("x", "y") + `"` + g.tag() + `}`
	case 26:
		return `{"type":"SUBAGENT_STARTED","subagentRunId":"` + g.pick("sa0", "sa1") + `","name":"w"` + g.opt("parentSubagentRunId", "sa0", "sa1") + g.opt("description", "d") + `}`
	case 27:
		return `{"type":"SUBAGENT_FINISHED","subagentRunId":"` + g.pick("sa0", "sa1") + `"` + g.pick("", `,"outcome":{"type":"suspended"}`, `,"result":[1]`) + `}`
	case 28:
		return `{"type":"SUBAGENT_ERROR","subagentRunId":"` + g.pick("sa0", "sa1") + `","message":"m"` + g.opt("code", "c") + `}`
	case 29:
		return `{"type":"RAW","event":{"x":1}` + g.tag() + `}`
	default:
		return `{"type":"CUSTOM","name":"acme.x","value":null` + g.tag() + `}`
	}
}
