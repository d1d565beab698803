package compact

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
	"github.com/threadcast/threadcast/reducer"
)

const (
	rs = `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
	rf = `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`
)

func lines(ls ...string) [][]byte {
	out := make([][]byte, len(ls))
	for i, l := range ls {
		out[i] = []byte(l)
	}
	return out
}

// TestCompactRules pins what each rule produces on small streams. The wanted
// output is written by hand from the rules in compact.go's doc comment; every
// case is also checked for the invariant.
func TestCompactRules(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want []string
	}{
		{
			name: "adjacent text deltas join, metadata merges last write wins",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Hel","metadata":{"a":1,"b":1}}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"lo","metadata":{"b":2,"c":null}}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"Hello","metadata":{"a":1,"b":2,"c":null}}`, rf},
		},
		{
			name: "interleaved items join per item across each other",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
				`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}`,
				`{"type":"RAW","event":1}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"}"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"TOOL_CALL_END","toolCallId":"c"}`, rf},
			// Each finished triad becomes one chunk at its START: the
			// TOOL_CALL_START closes the parent lane right after the text
			// chunk, and RUN_FINISHED closes the tool call's.
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"ab"}`,
				`{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","delta":"{}"}`,
				`{"type":"RAW","event":1}`, rf},
		},
		{
			name: "deltas join whatever their attribution, keeping the first one's",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b","subagentRunId":"s"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"ab","subagentRunId":"s"}`, rf},
		},
		{
			name: "a delta that closes an open chunk stream stays where it is",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","subagentRunId":"s"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"x"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"c"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"s"}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","subagentRunId":"s"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"x"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"bc"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"s"}`, rf},
		},
		{
			name: "a triad stays explicit when its lane is not closed before the input ends",
			give: []string{rs,
				`{"type":"REASONING_MESSAGE_START","messageId":"r","role":"reasoning","metadata":{"k":1}}`,
				`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"a"}`,
				`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"b"}`,
				`{"type":"REASONING_MESSAGE_END","messageId":"r"}`},
			want: []string{rs,
				`{"type":"REASONING_MESSAGE_START","messageId":"r","role":"reasoning","metadata":{"k":1}}`,
				`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"ab"}`,
				`{"type":"REASONING_MESSAGE_END","messageId":"r"}`},
		},
		{
			name: "a triad stays explicit when an id-less chunk could see its stream",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"x","subagentRunId":"s2"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","delta":"y"}`, rf},
			// The id-less chunk continues the sole open text stream (m2);
			// with m as a chunk stream still open in lane s1 it would be
			// ambiguous.
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"xy","subagentRunId":"s2"}`, rf},
		},
		{
			name: "a tool call triad becomes a chunk with its parent and the merged metadata",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m","metadata":{"a":1}}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"q\":","metadata":{"a":2,"b":1}}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"1}"}`,
				`{"type":"TOOL_CALL_END","toolCallId":"c","metadata":{"done":true}}`,
				`{"type":"STEP_STARTED","stepName":"x"}`,
				`{"type":"STEP_FINISHED","stepName":"x"}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m"}`,
				`{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","parentMessageId":"m","delta":"{\"q\":1}","metadata":{"a":2,"b":1,"done":true}}`,
				`{"type":"STEP_STARTED","stepName":"x"}`,
				`{"type":"STEP_FINISHED","stepName":"x"}`, rf},
		},
		{
			name: "a reopened item is not merged into the stream it reopens",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","name":"writer"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"one."}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","name":"other"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":" two."}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, rf},
			// As one chunk stream, the second opener would be a
			// continuation repeating name with another value (fatal); as
			// a reopen, the established name stands.
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m","name":"writer"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"one."}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","name":"other","delta":" two."}`, rf},
		},
		{
			name: "a chunk stream becomes one chunk",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a","metadata":{"k":1}}`,
				`{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}`,
				`{"type":"RAW","event":null}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"c","metadata":{"k":2}}`,
				`{"type":"TEXT_MESSAGE_CHUNK","metadata":{"usage":3}}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"abc","metadata":{"k":2,"usage":3}}`,
				`{"type":"RAW","event":null}`, rf},
		},
		{
			name: "a state delta does not fold while its lane has a chunk stream open",
			give: []string{rs,
				`{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}`,
				`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/x","value":[]}]}`, rf},
			want: []string{rs,
				`{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}`,
				`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2},{"op":"add","path":"/x","value":[]}]}`, rf},
		},
		{
			name: "state deltas fold into the snapshot before them",
			give: []string{rs,
				`{"type":"STATE_SNAPSHOT","snapshot":{"n":1,"l":[]}}`,
				`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}`,
				`{"type":"STEP_STARTED","stepName":"s"}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/l/-","value":"x"},{"op":"remove","path":"/n"}]}`,
				`{"type":"STEP_FINISHED","stepName":"s"}`, rf},
			want: []string{rs,
				`{"type":"STATE_SNAPSHOT","snapshot":{"l":["x"]}}`, rf},
		},
		{
			name: "steps that start and finish in the window vanish, per owner",
			give: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"STEP_STARTED","stepName":"a","subagentRunId":"s1"}`,
				`{"type":"STEP_STARTED","stepName":"b"}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`,
				`{"type":"CUSTOM","name":"n","value":1}`,
				`{"type":"STEP_FINISHED","stepName":"a","subagentRunId":"s1"}`,
				`{"type":"STEP_FINISHED","stepName":"b"}`, rf},
			want: []string{rs,
				`{"type":"CUSTOM","name":"n","value":1}`, rf},
		},
		{
			name: "a step still active at the window's end stays",
			give: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"STEP_STARTED","stepName":"b"}`,
				`{"type":"STEP_FINISHED","stepName":"b"}`},
			want: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`},
		},
		{
			name: "a step whose start closes a chunk stream stays",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}`,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}`, rf},
			// The id-less chunk after the step opens nothing: it is a
			// fatal continuation of a closed lane, and the step must
			// stay to close it.
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}`,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}`, rf},
		},
		{
			name: "a subagent's step vanishes while the parent's lane is open",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}`,
				`{"type":"STEP_STARTED","stepName":"a","subagentRunId":"s1"}`,
				`{"type":"STEP_FINISHED","stepName":"a","subagentRunId":"s1"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"ab"}`, rf},
		},
		{
			name: "a step whose end commits a triad stays",
			give: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`, rf},
			want: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"x"}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`, rf},
		},
		{
			name: "a step around an event that was not clean stays",
			give: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/missing"}]}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`, rf},
			want: []string{rs,
				`{"type":"STEP_STARTED","stepName":"a"}`,
				`{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/missing"}]}`,
				`{"type":"STEP_FINISHED","stepName":"a"}`, rf},
		},
		{
			name: "a patch that fails stays where it was, and nothing folds across it",
			give: []string{rs,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/b","value":1},{"op":"remove","path":"/missing"}]}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/c","value":1}]}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/d","value":1}]}`, rf},
			want: []string{rs,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/b","value":1},{"op":"remove","path":"/missing"}]}`,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/c","value":1},{"op":"add","path":"/d","value":1}]}`, rf},
		},
		{
			name: "a later snapshot replaces the state events before it",
			give: []string{rs,
				`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`,
				`{"type":"STATE_SNAPSHOT","snapshot":{"z":0}}`, rf},
			want: []string{rs,
				`{"type":"STATE_SNAPSHOT","snapshot":{"z":0}}`, rf},
		},
		{
			name: "activity deltas fold into the replacing snapshot, retyping it",
			give: []string{rs,
				`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"search","content":{"found":0},"metadata":{"x":1}}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"hi"}`,
				`{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"search2","patch":[{"op":"replace","path":"/found","value":3}],"metadata":{"y":2}}`, rf},
			want: []string{rs,
				`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"search2","content":{"found":3},"metadata":{"x":1,"y":2}}`,
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"hi"}`, rf},
		},
		{
			name: "nothing folds across a MESSAGES_SNAPSHOT",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
				`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","content":"zz"}]}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, rf},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
				`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","content":"zz"}]}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, rf},
		},
		{
			name: "events after a fatal error pass through untouched",
			give: []string{rs,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"a"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"b"}`},
			want: []string{rs,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"a"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"b"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			give := decodeEvents(t, lines(tt.give...))
			if len(give) != len(tt.give) {
				t.Fatalf("test input: %d of %d events decode", len(give), len(tt.give))
			}
			got := Events(give)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events, want %d:\n%s", len(got), len(tt.want), encodeJSONL(got, 100))
			}
			for i, w := range tt.want {
				g := codec.AppendEvent(nil, got[i])
				eq, err := jsondoc.Equal(g, []byte(w))
				if err != nil || !eq {
					t.Errorf("event %d:\n got %s\nwant %s", i, g, w)
				}
			}
			checkEquivalent(t, tt.name, nil, give, got)
		})
	}
}

// TestCompactConformancePrefixes checks the invariant on every prefix of every
// stream of the shared corpus (cases/ and official/), each from its own
// starting input.
func TestCompactConformancePrefixes(t *testing.T) {
	for _, c := range loadConformance(t) {
		t.Run(c.name, func(t *testing.T) {
			for k := 0; k <= len(c.events); k++ {
				prefix := c.events[:k]
				checkEquivalent(t, fmt.Sprintf("prefix %d", k), c.input, prefix, EventsFrom(c.input, prefix))
			}
		})
	}
}

// fixtures are the streams of testdata/compact, with the largest
// share of their events compaction may leave (a regression guard, set a
// little above what it achieves; short runs leave the least to fold, since
// every run boundary seals the window).
var fixtures = []struct {
	name     string
	maxShare float64
}{
	{"compact-a.jsonl.gz", 0.23},
	{"compact-b-nochunks.jsonl.gz", 0.11},
	{"compact-c-shortruns.jsonl.gz", 0.35},
	{"compact-d-plain.jsonl.gz", 0.24},
}

// TestCompactStreamgen checks the invariant on long random valid streams
// (testdata/compact, made by tools/streamgen; see
// testdata/compact/README.md): whole stream, many prefixes, and compaction
// frame by frame with flushes at random points, as the pipeline does it.
func TestCompactStreamgen(t *testing.T) {
	for _, fx := range fixtures {
		name := fx.name
		t.Run(name, func(t *testing.T) {
			c := loadFixture(t, name)
			if len(c.events) < 1000 {
				t.Fatalf("fixture decodes to %d events", len(c.events))
			}
			out := Events(c.events)
			checkEquivalent(t, "whole stream", nil, c.events, out)
			// Random valid streams are mostly deltas: compaction must
			// remove most events, not merely keep the view.
			if share := float64(len(out)) / float64(len(c.events)); share > fx.maxShare {
				t.Errorf("compacted %d events to %d (%.2f); want at most %.2f", len(c.events), len(out), share, fx.maxShare)
			}
			t.Logf("%d events -> %d", len(c.events), len(out))

			// Compacting the output again keeps the view and never grows
			// it. (It may shrink it a little: in the folded stream an
			// id-less chunk that kept a triad explicit is gone.)
			again := Events(out)
			checkEquivalent(t, "compacted twice", nil, c.events, again)
			if len(again) > len(out) {
				t.Errorf("a second Events went from %d to %d events", len(out), len(again))
			}

			rng := rand.New(rand.NewPCG(uint64(len(name)), 7))
			for i := 0; i < 40; i++ {
				k := rng.IntN(len(c.events) + 1)
				checkEquivalent(t, fmt.Sprintf("prefix %d", k), nil, c.events[:k], Events(c.events[:k]))
			}

			for round := 0; round < 5; round++ {
				framed := inFrames(c.events, rng, 1+round*7)
				checkEquivalent(t, fmt.Sprintf("frames of up to %d", 1+round*7), nil, c.events, framed)
			}
		})
	}
}

// inFrames compacts events the way the pipeline does: one Compactor,
// fed the reducer's verdicts, flushed after frames of random size.
func inFrames(events []*codec.Event, rng *rand.Rand, maxFrame int) []*codec.Event {
	th := reducer.NewThread("framed")
	c := New()
	var out []*codec.Event
	left := 1 + rng.IntN(maxFrame)
	for i, ev := range events {
		c.Add(ev, th.Apply(uint64(i)+1, ev))
		if left--; left == 0 {
			out = c.Flush(out)
			if c.Pending() != 0 {
				panic("Pending after Flush")
			}
			left = 1 + rng.IntN(maxFrame)
		}
	}
	return c.Flush(out)
}

// TestCompactOutputOwnsMemory poisons the input events after compaction; the
// output must not change.
func TestCompactOutputOwnsMemory(t *testing.T) {
	c := loadFixture(t, fixtures[0].name)
	events := c.events[:600]
	out := Events(events)
	before := encodeJSONL(out, len(out))
	for _, ev := range events {
		poisonEvent(ev)
	}
	if after := encodeJSONL(out, len(out)); after != before {
		t.Fatal("compacted events changed when the input events were overwritten")
	}
}

// poisonEvent overwrites every byte an event's strings and raw values point
// to. The events come from Clone, whose memory is private to the test.
func poisonEvent(ev *codec.Event) {
	for _, r := range []codec.Raw{ev.Metadata, ev.RawEvent, ev.Content, ev.Snapshot, ev.PatchRaw, ev.Value, ev.RawPayload, ev.Result} {
		for i := range r {
			r[i] = '#'
		}
	}
	for i := range ev.Patch {
		for j := range ev.Patch[i].Raw {
			ev.Patch[i].Raw[j] = '#'
		}
		for j := range ev.Patch[i].Value {
			ev.Patch[i].Value[j] = '#'
		}
	}
	// Strings are immutable; replacing them checks that no output event
	// aliases the input Event structs themselves.
	ev.Delta = strings.Repeat("#", len(ev.Delta))
	ev.MessageID, ev.ToolCallID = "#", "#"
}

// TestCompactorDropsStaleRedelivery: an event the Thread refuses as stale (a
// redelivered prefix after a crash) must not reach the output, where a
// consumer without sequence numbers would apply it a second time.
func TestCompactorDropsStaleRedelivery(t *testing.T) {
	events := decodeEvents(t, lines(rs,
		`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, rf))
	th := reducer.NewThread("stale")
	c := New()
	seqs := []uint64{1, 2, 3, 4, 5, 6}
	var fed []*codec.Event
	for i, ev := range events {
		c.Add(ev, th.Apply(seqs[i], ev))
		fed = append(fed, ev)
		if i == 2 { // redeliver seq 3 (CONTENT "a") after it was applied
			res := th.Apply(2, events[2])
			if !errors.Is(res.Fatal, reducer.ErrStaleSeq) {
				t.Fatalf("redelivery: want ErrStaleSeq, got %v", res.Fatal)
			}
			c.Add(events[2], res)
		}
	}
	out := c.Flush(nil)
	checkEquivalent(t, "stale redelivery", nil, fed, out)
	if got := encodeJSONL(out, 10); !strings.Contains(got, `"delta":"ab"`) {
		t.Errorf("want the content joined once, as \"ab\":\n%s", got)
	}
}

// TestCompactorCopiesWhatItKeeps: Add's contract is that the caller may
// reuse ev, and the bytes its strings view, once Add returns, as the
// pipeline's shards and threadcast compact do with one Decoder and one read
// buffer. Fed that way, from a buffer overwritten with '#' after every
// event, the Compactor must give what Events gives on events that own
// their memory. Until 2026-12-01 an ACTIVITY_DELTA folded into a held
// activity kept views of its activityType and subagentRunId (found by a
// differential run of threadcast compact on streamgen streams).
func TestCompactorCopiesWhatItKeeps(t *testing.T) {
	activity := testCase{name: "activity folds", events: decodeEvents(t, lines(rs,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"sa-1","name":"summarizer"}`,
		`{"type":"ACTIVITY_SNAPSHOT","messageId":"act-1","activityType":"plan","content":{"a":1},"subagentRunId":"sa-1"}`,
		`{"type":"ACTIVITY_SNAPSHOT","messageId":"act-1","activityType":"plan","content":{"z":0},"replace":false,"subagentRunId":"sa-1"}`,
		`{"type":"ACTIVITY_DELTA","messageId":"act-1","activityType":"plan","patch":[{"op":"add","path":"/b","value":2}]}`,
		`{"type":"ACTIVITY_DELTA","messageId":"act-1","activityType":"plan","patch":[{"op":"add","path":"/c","value":3}],"subagentRunId":"sa-1"}`,
		`{"type":"ACTIVITY_SNAPSHOT","messageId":"act-2","activityType":"draft","content":{"a":1}}`,
		`{"type":"ACTIVITY_DELTA","messageId":"act-2","activityType":"final","patch":[{"op":"add","path":"/b","value":2}]}`,
		`{"type":"SUBAGENT_FINISHED","subagentRunId":"sa-1"}`, rf))}
	cases := []testCase{activity}
	for _, fx := range fixtures {
		cases = append(cases, loadFixture(t, fx.name))
	}
	for _, cc := range cases {
		t.Run(cc.name, func(t *testing.T) {
			want := encodeJSONL(Events(cc.events), -1)
			th := reducer.NewThread("t")
			c := New()
			var dec codec.Decoder
			var ev codec.Event
			var buf []byte
			for i, owned := range cc.events {
				buf = codec.AppendEvent(buf[:0], owned)
				if err := dec.Decode(buf, &ev); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				c.Add(&ev, th.Apply(uint64(i+1), &ev))
				for j := range buf {
					buf[j] = '#'
				}
			}
			if got := encodeJSONL(c.Flush(nil), -1); got != want {
				t.Fatalf("streamed Compactor output differs from Events's\n got %.2000s\nwant %.2000s", got, want)
			}
		})
	}
}

// TestCompactKeepsMintedIDs: the ids the reducer mints for the retired
// THINKING_* events are part of the events Events returns, so its output
// applies again to the same messages, now with no translation warning.
func TestCompactKeepsMintedIDs(t *testing.T) {
	stream := decodeEvents(t, lines(rs,
		`{"type":"THINKING_START","title":"plan"}`,
		`{"type":"THINKING_TEXT_MESSAGE_START"}`,
		`{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"hmm"}`,
		`{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":" more"}`,
		`{"type":"THINKING_TEXT_MESSAGE_END"}`,
		`{"type":"THINKING_END"}`,
		rf))
	if len(stream) != 8 {
		t.Fatalf("the codec kept %d of 8 events", len(stream))
	}
	thr := reducer.NewThread("t")
	for i, ev := range stream {
		if res := thr.Apply(uint64(i+1), ev); res.Fatal != nil {
			t.Fatal(res.Fatal)
		}
	}
	again := reducer.NewThread("t")
	for i, ev := range Events(stream) {
		if res := again.Apply(uint64(i+1), ev); res.Fatal != nil || len(res.Warnings) != 0 {
			t.Fatalf("compacted event %d: %v %v", i, res.Fatal, res.Warnings)
		}
	}
	got, want := again.AppendMessages(nil), thr.AppendMessages(nil)
	if eq, err := jsondoc.Equal(got, want); err != nil || !eq {
		t.Errorf("messages differ (err %v)\n got %s\nwant %s", err, got, want)
	}
}
