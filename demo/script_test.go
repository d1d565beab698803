package demo

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// runs returns the first n runs of the script for seed, flattened.
func runs(seed uint64, opts Options, n int) []Event {
	s := NewScript(seed, opts)
	var out []Event
	for range n {
		out = append(out, s.NextRun()...)
	}
	return out
}

func TestScriptDeterministic(t *testing.T) {
	tests := []struct {
		name      string
		giveA     uint64
		giveB     uint64
		giveOpts  Options
		wantEqual bool
	}{
		{"same seed", 42, 42, Options{}, true},
		{"same seed and persona", 7, 7, Options{Persona: "devops", ThreadID: "t-1"}, true},
		{"different seeds", 42, 43, Options{}, false},
		{"different seeds, same persona", 1, 2, Options{Persona: "travel", ThreadID: "t"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := runs(tt.giveA, tt.giveOpts, 6), runs(tt.giveB, tt.giveOpts, 6)
			equal := len(a) == len(b)
			for i := 0; equal && i < len(a); i++ {
				equal = bytes.Equal(a[i].JSON, b[i].JSON) && a[i].Pause == b[i].Pause && a[i].Type == b[i].Type
			}
			if equal != tt.wantEqual {
				t.Fatalf("streams equal = %v, want %v (%d vs %d events)", equal, tt.wantEqual, len(a), len(b))
			}
		})
	}
}

// TestScriptEventsWellFormed checks what needs no codec: each event is one
// JSON object whose "type" is Event.Type, the ids are those of the thread,
// pauses are sane, and every run is bracketed by RUN_STARTED and a terminal
// event.
func TestScriptEventsWellFormed(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		s := NewScript(seed, Options{})
		for r := 0; r < 5; r++ {
			run := s.NextRun()
			if run[0].Type != RunStarted {
				t.Fatalf("seed %d run %d starts with %s", seed, r, run[0].Type)
			}
			if last := run[len(run)-1].Type; last != RunFinished && last != RunError {
				t.Fatalf("seed %d run %d ends with %s", seed, r, last)
			}
			for i, ev := range run {
				var m map[string]any
				if err := json.Unmarshal(ev.JSON, &m); err != nil {
					t.Fatalf("seed %d run %d event %d: %v: %s", seed, r, i, err, ev.JSON)
				}
				if m["type"] != ev.Type {
					t.Fatalf("type %v, Event.Type %s", m["type"], ev.Type)
				}
				if id, ok := m["threadId"]; ok && id != s.ThreadID() {
					t.Fatalf("threadId %v, want %s", id, s.ThreadID())
				}
				for k, v := range m {
					if v == nil {
						t.Fatalf("event %s has a null %q: optional fields must be absent", ev.JSON, k)
					}
				}
				if ev.Pause < 0 || ev.Pause > 10e9 {
					t.Fatalf("pause %v", ev.Pause)
				}
				if bytes.ContainsAny(ev.JSON, "\n\r") {
					t.Fatalf("event has a raw newline: %q", ev.JSON)
				}
			}
		}
	}
}

// corpus generates many threads of every persona, with errors and
// cancellations more frequent than by default so that they all show up.
func corpus(threads, runsPer int) [][]Event {
	var out [][]Event
	for seed := uint64(0); seed < uint64(threads); seed++ {
		out = append(out, runs(seed, Options{Persona: Personas()[seed%3], ErrorRate: 0.2, CancelRate: 0.1}, runsPer))
	}
	return out
}

// TestScriptMix checks that the traffic looks like an assistant's: most
// events are text deltas, and every feature the dashboard shows appears.
func TestScriptMix(t *testing.T) {
	counts := map[string]int{}
	features := map[string]int{}
	total := 0
	probes := []struct{ name, typ, substr string }{
		{"web_search snapshot", ActivitySnapshot, `"activityType":"web_search"`},
		{"web_search result", ActivityDelta, `"path":"/results/-"`},
		{"checklist tick", ActivityDelta, `"activityType":"checklist"`},
		{"unknown activity", ActivitySnapshot, `"activityType":"code_diff"`},
		{"plan in state", StateSnapshot, `"plan":{"goal"`},
		{"plan progress", StateDelta, `"value":"in_progress"`},
		{"guarded delta", StateDelta, `"op":"test"`},
		{"subagent note", StateDelta, `"subagentRunId"`},
		{"nested subagent", SubagentStarted, `"parentSubagentRunId"`},
		{"agent as tool", SubagentStarted, `"parentToolCallId"`},
		{"attributed text", TextMessageStart, `"subagentRunId"`},
		{"attributed reasoning", ReasoningMessageContent, `"subagentRunId"`},
		{"encrypted reasoning", ReasoningEncryptedValue, `"subtype":"message"`},
		{"encrypted tool call", ReasoningEncryptedValue, `"subtype":"tool-call"`},
		{"token usage in metadata", TextMessageEnd, `"threadcast.demo/usage"`},
		{"null metadata value", TextMessageEnd, `"threadcast.demo/cacheKey":null`},
		{"run usage", RunFinished, `"usage":[`},
		{"subagent model usage", RunFinished, `"model":"demo-small-1"`},
		{"cancelled", RunFinished, `"type":"cancelled"`},
		{"run error usage", RunError, `"usage":[`},
		{"markup-like text", TextMessageContent, `<`},
		{"non-ASCII text", TextMessageContent, `é`},
	}
	var late int
	for _, thread := range corpus(60, 4) {
		for i, ev := range thread {
			counts[ev.Type]++
			total++
			for _, p := range probes {
				if ev.Type == p.typ && strings.Contains(string(ev.JSON), p.substr) {
					features[p.name]++
				}
			}
			if ev.Type == RunError && i > 0 && thread[i-1].Type == RunFinished {
				late++
			}
		}
	}
	for _, typ := range []string{RunStarted, RunFinished, RunError, StepStarted, StepFinished, TextMessageStart, TextMessageContent, TextMessageEnd,
		ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallResult, ReasoningStart, ReasoningMessageStart, ReasoningMessageContent,
		ReasoningMessageEnd, ReasoningEnd, ReasoningEncryptedValue, StateSnapshot, StateDelta, ActivitySnapshot, ActivityDelta,
		SubagentStarted, SubagentFinished, SubagentError} {
		if counts[typ] == 0 {
			t.Errorf("no %s in the corpus", typ)
		}
	}
	for _, p := range probes {
		if features[p.name] == 0 {
			t.Errorf("feature %q never generated", p.name)
		}
	}
	if late == 0 {
		t.Error("no late RUN_ERROR after RUN_FINISHED")
	}
	share := float64(counts[TextMessageContent]) / float64(total)
	for typ, n := range counts {
		if n > counts[TextMessageContent] && typ != TextMessageContent {
			t.Errorf("%s (%d) outnumbers TEXT_MESSAGE_CONTENT (%d)", typ, n, counts[TextMessageContent])
		}
	}
	if share < 0.5 {
		t.Errorf("TEXT_MESSAGE_CONTENT is %.0f%% of events, want most", 100*share)
	}
	t.Logf("%d events, %.0f%% TEXT_MESSAGE_CONTENT, %d RUN_ERROR, %d late", total, 100*share, counts[RunError], late)
}

// TestScriptTokensReassemble checks that streamed deltas concatenate to the
// text the generator meant, byte for byte, with no cut inside a UTF-8
// sequence.
func TestScriptTokensReassemble(t *testing.T) {
	s := NewScript(3, Options{})
	tests := []struct{ give string }{
		{"Hello world"},
		{"Kyōto’s temples — stroller-friendly? 🌧️ yes\n\n- **Tram 28** at Martim Moniz\n"},
		{"internationalisation supercalifragilistic é€→"},
		{""},
	}
	for _, tt := range tests {
		toks := s.tokens(tt.give)
		if got := strings.Join(toks, ""); got != tt.give {
			t.Errorf("tokens(%q) joined = %q", tt.give, got)
		}
		for _, tok := range toks {
			if tok == "" || !utf8.ValidString(tok) {
				t.Errorf("tokens(%q): bad token %q", tt.give, tok)
			}
		}
		ch := s.chunks(tt.give)
		if got := strings.Join(ch, ""); got != tt.give {
			t.Errorf("chunks(%q) joined = %q", tt.give, got)
		}
		for _, c := range ch {
			if !utf8.ValidString(c) {
				t.Errorf("chunks(%q): cut inside a rune: %q", tt.give, c)
			}
		}
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ give string }{
		{"plain"}, {`quote " and backslash \`}, {"tab\tnewline\ncr\r"}, {"\x00\x01\x1f"}, {"<b>é</b> 🌧️"}, {""},
	}
	for _, tt := range tests {
		b := appendString(nil, tt.give)
		var got string
		if err := json.Unmarshal(b, &got); err != nil || got != tt.give {
			t.Errorf("appendString(%q) = %s, decodes to %q, %v", tt.give, b, got, err)
		}
		if bytes.Contains(b, []byte(`\u003c`)) {
			t.Errorf("appendString(%q) escaped '<': %s", tt.give, b)
		}
	}
}
