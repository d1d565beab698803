package reducer

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// corpusStream is one stream of the shared corpus with its starting point.
type corpusStream struct {
	name    string
	initial *corpusInitial
	input   json.RawMessage
	events  []json.RawMessage
	proto   string // see corpusRun.proto
}

// corpusStreams loads every case and every official fixture.
func corpusStreams(t *testing.T) []corpusStream {
	t.Helper()
	var out []corpusStream
	for _, file := range loadJSONFiles(t, "cases") {
		var c corpusCase
		readJSON(t, file, &c)
		out = append(out, corpusStream{name: filepath.Base(file), initial: c.Initial, events: c.Events, proto: "1.0"})
	}
	for _, file := range loadJSONFiles(t, "official") {
		var f officialFixture
		readJSON(t, file, &f)
		out = append(out, corpusStream{name: "official/" + filepath.Base(file), input: f.Input, events: f.Stream})
	}
	return out
}

func (s *corpusStream) start(t *testing.T) *Thread {
	t.Helper()
	thr := startThread(t, s.initial)
	if len(s.input) > 0 {
		var dec = new(codecDecoderForTests)
		dec.setInput(t, thr, s.input)
	}
	return thr
}

// TestCheckpointEverySplit checks, for every corpus stream and every split
// point k, that checkpointing after k events, loading, and applying the rest
// gives the same view, warnings and verdict as never stopping.
func TestCheckpointEverySplit(t *testing.T) {
	for _, s := range corpusStreams(t) {
		t.Run(strings.TrimSuffix(s.name, ".json"), func(t *testing.T) {
			want := &corpusRun{thread: s.start(t), fatalIdx: -1, proto: s.proto}
			feedRange(want, s.events, 0, len(s.events))
			wantView := want.thread.AppendView(nil)
			for k := 0; k <= len(s.events); k++ {
				got := &corpusRun{thread: s.start(t), fatalIdx: -1, proto: s.proto}
				if feedRange(got, s.events, 0, k) {
					cp := got.thread.AppendCheckpoint(nil)
					loaded, err := LoadCheckpoint(cp)
					if err != nil {
						t.Fatalf("k=%d: LoadCheckpoint: %v\n%s", k, err, cp)
					}
					if again := loaded.AppendCheckpoint(nil); !bytes.Equal(again, cp) {
						t.Fatalf("k=%d: checkpoint does not round-trip\nfirst  %s\nsecond %s", k, cp, again)
					}
					got.thread = loaded
					feedRange(got, s.events, k, len(s.events))
				}
				if gotView := got.thread.AppendView(nil); !bytes.Equal(gotView, wantView) {
					t.Fatalf("k=%d: view differs\ngot  %s\nwant %s", k, gotView, wantView)
				}
				if got.fatalIdx != want.fatalIdx || len(got.warnIdx) != len(want.warnIdx) {
					t.Fatalf("k=%d: fatal at %d with %d warnings, want %d with %d", k,
						got.fatalIdx, len(got.warnIdx), want.fatalIdx, len(want.warnIdx))
				}
			}
		})
	}
}

// TestCheckpointSplitLoneSurrogates is TestCheckpointEverySplit on a
// stream whose ids, names and texts hold escaped lone surrogates, which
// are valid JSON (and valid JavaScript strings) and decode to bytes that
// are not UTF-8: a checkpoint must give them back as they were, or a
// thread reloaded inside the stream no longer finds its open message, tool
// call, step or chunk lane.
func TestCheckpointSplitLoneSurrogates(t *testing.T) {
	var events []json.RawMessage
	for _, e := range []string{
		`{"type":"RUN_STARTED","threadId":"thread-1","runId":"r\ud800"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m\ud800","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m\ud800","delta":"a\udfff"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c\udc00","toolCallName":"f\ud800","parentMessageId":"m\ud800"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c\udc00","delta":"{}"}`,
		`{"type":"STEP_STARTED","stepName":"s\ud800"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m\ud800"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c\udc00"}`,
		`{"type":"STEP_FINISHED","stepName":"s\ud800"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"k\ud800","role":"assistant","delta":"x"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","delta":"y"}`,
		`{"type":"TOOL_CALL_CHUNK","toolCallId":"\u0000c","toolCallName":"g","delta":"{"}`,
		`{"type":"TOOL_CALL_CHUNK","delta":"}"}`,
		`{"type":"RUN_FINISHED","threadId":"thread-1","runId":"r\ud800"}`,
	} {
		events = append(events, json.RawMessage(e))
	}
	want := &corpusRun{thread: NewThread("thread-1"), fatalIdx: -1, proto: "1.0"}
	feedRange(want, events, 0, len(events))
	if want.fatalIdx >= 0 || len(want.warnIdx) > 0 {
		t.Fatalf("the stream itself: fatal at %d, warnings %v", want.fatalIdx, want.warnText)
	}
	wantView := want.thread.AppendView(nil)
	for k := 0; k <= len(events); k++ {
		got := &corpusRun{thread: NewThread("thread-1"), fatalIdx: -1, proto: "1.0"}
		feedRange(got, events, 0, k)
		cp := got.thread.AppendCheckpoint(nil)
		loaded, err := LoadCheckpoint(cp)
		if err != nil {
			t.Fatalf("k=%d: LoadCheckpoint: %v\n%s", k, err, cp)
		}
		if again := loaded.AppendCheckpoint(nil); !bytes.Equal(again, cp) {
			t.Fatalf("k=%d: checkpoint does not round-trip\nfirst  %s\nsecond %s", k, cp, again)
		}
		got.thread = loaded
		feedRange(got, events, k, len(events))
		if gotView := got.thread.AppendView(nil); !bytes.Equal(gotView, wantView) || got.fatalIdx != -1 || len(got.warnIdx) > 0 {
			t.Fatalf("k=%d: fatal at %d, warnings %v, view\n%s\nwant\n%s", k, got.fatalIdx, got.warnText, gotView, wantView)
		}
	}
}

func TestLoadCheckpointErrors(t *testing.T) {
	good := NewThread("t").AppendCheckpoint(nil)
	tests := []struct {
		name string
		give string
	}{
		{"not json", "{"},
		{"wrong version", strings.Replace(string(good), `"v":1`, `"v":99`, 1)},
		{"bad phase", strings.Replace(string(good), `"phase":0`, `"phase":9`, 1)},
		{"bad messages", strings.Replace(string(good), `"messages":[]`, `"messages":[{"id":1}]`, 1)},
		{"bad active index", strings.Replace(string(good), `"machine":{`, `"machine":{"active":[3],`, 1)},
		{"bad lane kind", strings.Replace(string(good), `"machine":{`, `"machine":{"lanes":[{"o":{},"k":9,"id":"x","tag":{}}],`, 1)},
		{"bad marked string", strings.Replace(string(good), `"machine":{`, `"machine":{"closed":["\u0000not base64!"],`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.give == string(good) {
				t.Fatalf("test input did not change the checkpoint: %s", good)
			}
			_, err := LoadCheckpoint([]byte(tt.give))
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("err = %v, want ErrCheckpoint", err)
			}
		})
	}
}

// TestLoadCheckpointWithoutSpanOwners: a checkpoint written before spans had
// their own owner map keeps span owners in ownReason; loading it still
// checks an open span's end against its opener's owner.
func TestLoadCheckpointWithoutSpanOwners(t *testing.T) {
	thr := NewThread("t")
	for i, l := range []string{vRS, `{"type":"SUBAGENT_STARTED","subagentRunId":"x","name":"n"}`,
		`{"type":"REASONING_START","messageId":"s","subagentRunId":"x"}`} {
		if res := applyLine(t, thr, uint64(i+1), l); res.Fatal != nil {
			t.Fatal(res.Fatal)
		}
	}
	var ck map[string]any
	mustUnmarshal(t, thr.AppendCheckpoint(nil), &ck)
	mach := ck["machine"].(map[string]any)
	mach["ownReason"] = mach["ownSpan"] // the old layout
	delete(mach, "ownSpan")
	old, err := json.Marshal(ck)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := LoadCheckpoint(old)
	if err != nil {
		t.Fatal(err)
	}
	res := applyLine(t, restored, 4, `{"type":"REASONING_END","messageId":"s","subagentRunId":"y"}`)
	if !errors.Is(res.Fatal, &ProtocolError{Code: "A1"}) {
		t.Fatalf("end tagged by another owner after loading an old checkpoint: %v, want A1", res.Fatal)
	}
}
