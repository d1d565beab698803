package web_test

import (
	"encoding/json"
	"testing"
)

// A small view document and payloads built by hand, one per rule of the
// change format (pipeline/reduce.go appendChanges, as the fanout frames it).
const baseView = `{"type":"view","seq":10,"view":{"threadId":"t","seq":10,"status":"running","messages":[
 {"id":"u1","role":"user","content":"hi"},
 {"id":"a1","role":"assistant","content":"Hel"}],
 "state":{"plan":{"steps":[{"status":"pending"}]},"a/b":1},"runs":[],"steps":[],"subagents":[],"warnings":0,"error":null}}`

func TestViewDocApplies(t *testing.T) {
	tests := []struct {
		name     string
		give     string // the changes payload applied after baseView
		wantView string // the view the applier must then hold
	}{
		{
			"append text",
			`{"type":"changes","seq":11,"prev":10,"changes":{"messages":[{"index":1,"op":"append","text":"lo"}]}}`,
			`{"threadId":"t","seq":11,"status":"running","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"Hello"}],"state":{"plan":{"steps":[{"status":"pending"}]},"a/b":1},"runs":[],"steps":[],"subagents":[],"warnings":0,"error":null}`,
		},
		{
			"add and replace",
			`{"type":"changes","seq":12,"prev":10,"changes":{"messages":[{"index":1,"op":"replace","message":{"id":"a1","role":"assistant","content":"Hey","name":"Atlas"}},{"index":2,"op":"add","message":{"id":"x","role":"activity","activityType":"web_search","content":{"query":"q"}}}]}}`,
			`{"threadId":"t","seq":12,"status":"running","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"Hey","name":"Atlas"},{"id":"x","role":"activity","activityType":"web_search","content":{"query":"q"}}],"state":{"plan":{"steps":[{"status":"pending"}]},"a/b":1},"runs":[],"steps":[],"subagents":[],"warnings":0,"error":null}`,
		},
		{
			"state patches in order, escaped pointers",
			`{"type":"changes","seq":13,"prev":10,"changes":{"stateOps":[[{"op":"replace","path":"/plan/steps/0/status","value":"done"},{"op":"add","path":"/plan/steps/-","value":{"status":"pending"}}],[{"op":"test","path":"/a~1b","value":1},{"op":"remove","path":"/a~1b"},{"op":"copy","from":"/plan/steps/0","path":"/first"},{"op":"move","from":"/first","path":"/moved"}]]}}`,
			`{"threadId":"t","seq":13,"status":"running","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"Hel"}],"state":{"plan":{"steps":[{"status":"done"},{"status":"pending"}]},"moved":{"status":"done"}},"runs":[],"steps":[],"subagents":[],"warnings":0,"error":null}`,
		},
		{
			"state replaced, warnings",
			`{"type":"changes","seq":14,"prev":10,"changes":{"state":null,"warnings":2}}`,
			`{"threadId":"t","seq":14,"status":"running","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"Hel"}],"state":null,"runs":[],"steps":[],"subagents":[],"warnings":2,"error":null}`,
		},
		{
			"structural change",
			`{"type":"changes","seq":15,"prev":10,"changes":{"allMessages":[{"id":"a1","role":"assistant","content":"Hel"}]}}`,
			`{"threadId":"t","seq":15,"status":"running","messages":[{"id":"a1","role":"assistant","content":"Hel"}],"state":{"plan":{"steps":[{"status":"pending"}]},"a/b":1},"runs":[],"steps":[],"subagents":[],"warnings":0,"error":null}`,
		},
		{
			"whole view",
			`{"type":"changes","seq":16,"prev":10,"changes":{"view":{"threadId":"t","seq":16,"status":"finished","messages":[],"state":{},"runs":[{"runId":"r","status":"finished"}],"steps":[],"subagents":[],"warnings":0,"error":null},"warnings":0}}`,
			`{"threadId":"t","seq":16,"status":"finished","messages":[],"state":{},"runs":[{"runId":"r","status":"finished"}],"steps":[],"subagents":[],"warnings":0,"error":null}`,
		},
		{
			"runs, steps and subagents by name",
			`{"type":"changes","seq":18,"prev":10,"changes":{"runs":[{"runId":"r","status":"error"}],"steps":[{"name":"s"}],"subagents":[],"status":"errored","error":null}}`,
			`{"threadId":"t","seq":18,"status":"errored","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"Hel"}],"state":{"plan":{"steps":[{"status":"pending"}]},"a/b":1},"runs":[{"runId":"r","status":"error"}],"steps":[{"name":"s"}],"subagents":[],"warnings":0,"error":null}`,
		},
		{
			"nothing visible changed",
			`{"type":"changes","seq":17,"prev":10,"changes":null}`,
			`{"threadId":"t","seq":17,"status":"running","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"Hel"}],"state":{"plan":{"steps":[{"status":"pending"}]},"a/b":1},"runs":[],"steps":[],"subagents":[],"warnings":0,"error":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, errs := replay(t, []step{{Payload: json.RawMessage(baseView)}, {Payload: json.RawMessage(tt.give), Want: json.RawMessage(tt.wantView)}})
			if ok != 2 || len(errs) > 0 {
				t.Fatalf("ok %d, errors %v", ok, errs)
			}
		})
	}
}

// TestViewDocRefuses checks that each way of losing track makes the
// applier ask for a resync instead of showing a wrong view.
func TestViewDocRefuses(t *testing.T) {
	tests := []struct{ name, give string }{
		{"gap in seq", `{"type":"changes","seq":12,"prev":11,"changes":null}`},
		{"append past the end", `{"type":"changes","seq":11,"prev":10,"changes":{"messages":[{"index":5,"op":"append","text":"x"}]}}`},
		{"append to non-text content", `{"type":"changes","seq":11,"prev":10,"changes":{"messages":[{"index":0,"op":"append","text":1}]}}`},
		{"add not at the end", `{"type":"changes","seq":11,"prev":10,"changes":{"messages":[{"index":0,"op":"add","message":{"id":"n","role":"user","content":""}}]}}`},
		{"replace of another message", `{"type":"changes","seq":11,"prev":10,"changes":{"messages":[{"index":0,"op":"replace","message":{"id":"zz","role":"user","content":""}}]}}`},
		{"unknown op", `{"type":"changes","seq":11,"prev":10,"changes":{"messages":[{"index":0,"op":"frobnicate"}]}}`},
		{"patch does not apply", `{"type":"changes","seq":11,"prev":10,"changes":{"stateOps":[[{"op":"replace","path":"/nope/0","value":1}]]}}`},
		{"failed test op", `{"type":"changes","seq":11,"prev":10,"changes":{"stateOps":[[{"op":"test","path":"/a~1b","value":2}]]}}`},
		{"bad array index", `{"type":"changes","seq":11,"prev":10,"changes":{"stateOps":[[{"op":"add","path":"/plan/steps/01","value":1}]]}}`},
		{"changes not an object", `{"type":"changes","seq":11,"prev":10,"changes":[1]}`},
		{"unknown payload type", `{"type":"surprise","seq":11}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, errs := replay(t, []step{{Payload: json.RawMessage(baseView)}, {Payload: json.RawMessage(tt.give), Resync: true}})
			if ok != 2 || len(errs) > 0 {
				t.Fatalf("ok %d, errors %v", ok, errs)
			}
		})
	}
	// Changes before any view are refused too.
	ok, errs := replay(t, []step{{Payload: json.RawMessage(`{"type":"changes","seq":1,"prev":0,"changes":null}`), Resync: true}})
	if ok != 1 || len(errs) > 0 {
		t.Fatalf("changes before a view: ok %d, errors %v", ok, errs)
	}
}
