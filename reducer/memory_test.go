package reducer

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryProportionalToContent applies many small events that add little
// content (8-byte deltas, metadata rewriting the same keys, state patches
// replacing the same member) and checks that the live heap the Thread holds
// grows with the content, not with the number of events.
func TestMemoryProportionalToContent(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few MB")
	}
	const n = 40_000
	evs := []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`}
	for i := 0; i < n; i++ {
		evs = append(evs,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"12345678","metadata":{"k":`+strconv.Itoa(i)+`}}`,
			`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":`+strconv.Itoa(i)+`}]}`)
	}
	evs = append(evs, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, vRF)
	decoded := make([]*codecEventT, len(evs))
	for i, l := range evs {
		decoded[i] = codecEvent(t, l)
	}
	before := heapAfterGC()
	thr := NewThread("t")
	if err := thr.SetInput(&codecRunInputT{State: []byte(`{"n":0}`)}); err != nil {
		t.Fatal(err)
	}
	for i, e := range decoded {
		if res := thr.Apply(uint64(i+1), e); res.Fatal != nil || len(res.Warnings) > 0 {
			t.Fatalf("event %d: %v %v", i, res.Fatal, res.Warnings)
		}
	}
	thr.Flush()
	held := int64(heapAfterGC()) - int64(before)
	content := int64(8 * n)
	// Text grows by doubling (up to 2x content); the rest is a constant.
	if held > 3*content+256<<10 {
		t.Fatalf("thread holds %d bytes for %d bytes of content after %d events", held, content, len(evs))
	}
	if ms := thr.MemSize(); int64(ms) < content || int64(ms) > 3*content+64<<10 {
		t.Fatalf("MemSize %d for %d bytes of content", ms, content)
	}
	t.Logf("%d events, %d bytes of content: thread holds %d bytes, MemSize %d", len(evs), content, held, thr.MemSize())
	runtime.KeepAlive(thr)
	runtime.KeepAlive(decoded)
}

type (
	codecEventT    = codec.Event
	codecRunInputT = codec.RunInput
)

// TestMemoryDroppedMessagesReleased streams messages that a
// MESSAGES_SNAPSHOT then drops, one batch per run, and checks that the
// live heap the Thread holds grows with what it keeps (runs, the one
// restated message), not with the ids of the messages it dropped: the
// copies of a dropped message's ids must not stay resident next to ids
// that live as long as the thread (a run's).
func TestMemoryDroppedMessagesReleased(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few MB")
	}
	const runs, perRun = 1000, 40
	var evs []string
	seq := 0
	for r := 0; r < runs; r++ {
		runID := "run-" + strconv.Itoa(r)
		evs = append(evs, `{"type":"RUN_STARTED","threadId":"t","runId":"`+runID+`"}`)
		for i := 0; i < perRun; i++ {
			seq++
			id := strconv.Itoa(seq)
			id = "message-" + strings.Repeat("0", 56-len(id)) + id // 64 bytes
			evs = append(evs,
				`{"type":"TEXT_MESSAGE_START","messageId":"`+id+`"}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"`+id+`"}`)
		}
		evs = append(evs,
			`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"kept","role":"user","content":"x"}]}`,
			`{"type":"RUN_FINISHED","threadId":"t","runId":"`+runID+`"}`)
	}
	decoded := make([]*codecEventT, len(evs))
	for i, l := range evs {
		decoded[i] = codecEvent(t, l)
	}
	before := heapAfterGC()
	thr := NewThread("t")
	for i, e := range decoded {
		if res := thr.Apply(uint64(i+1), e); res.Fatal != nil || len(res.Warnings) > 0 {
			t.Fatalf("event %d: %v %v", i, res.Fatal, res.Warnings)
		}
	}
	thr.Flush()
	held := int64(heapAfterGC()) - int64(before)
	dropped := int64(runs * perRun * 64)
	// A run costs a few hundred bytes; 1 KiB each is generous. The
	// dropped ids alone would be 2.5 MiB.
	if limit := int64(runs)<<10 + 256<<10; held > limit {
		t.Fatalf("thread holds %d bytes (limit %d) after dropping %d bytes of message ids", held, limit, dropped)
	}
	t.Logf("thread holds %d bytes after dropping %d bytes of message ids; MemSize %d", held, dropped, thr.MemSize())
	runtime.KeepAlive(thr)
	runtime.KeepAlive(decoded)
}

// TestViewSizeSurvivesCheckpoint: ViewSize, which the pipeline's view
// limit is decided on, is the same for a Thread built event by event and
// for that Thread loaded from its checkpoint, after every event of streams
// whose buffers grow by appending (text, tool arguments) and whose
// documents are split by patches (state, activity content, metadata), and
// of every conformance case and official fixture. MemSize is not: it
// counts grown buffers' capacity and split documents' nodes.
func TestViewSizeSurvivesCheckpoint(t *testing.T) {
	type give struct {
		name   string
		thread *Thread
		proto  string
		events []json.RawMessage
	}
	lines := func(ls ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(ls))
		for i, l := range ls {
			out[i] = json.RawMessage(l)
		}
		return out
	}
	text := []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`}
	args := []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"m1"}`}
	for range 40 {
		text = append(text, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"0123456789"}`)
		args = append(args, `{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"k\":1}"}`)
	}
	docs := []string{vRS,
		`{"type":"STATE_SNAPSHOT","snapshot":{"a":{"b":[1,2]},"c":"x","c":"dup"}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a/b/-","value":{"n":"\u00e9"}},{"op":"copy","from":"/a","path":"/d"}]}`,
		`{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"plan","content":{"steps":[{"s":1}]}}`,
		`{"type":"ACTIVITY_DELTA","messageId":"a1","activityType":"plan","patch":[{"op":"add","path":"/steps/-","value":{"s":2}}]}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant","metadata":{"k":1}}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"hi","metadata":{"j":[true]}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"move","from":"/d","path":"/a/e"},{"op":"remove","path":"/c"}]}`,
		vRF,
	}
	cases := []give{
		{name: "text appended", thread: NewThread("t"), events: lines(text...)},
		{name: "arguments appended", thread: NewThread("t"), events: lines(args...)},
		{name: "documents patched", thread: NewThread("t"), events: lines(docs...)},
	}
	for _, file := range loadJSONFiles(t, "cases") {
		var c corpusCase
		readJSON(t, file, &c)
		cases = append(cases, give{name: "cases/" + filepath.Base(file), thread: startThread(t, c.Initial), proto: "1.0", events: c.Events})
	}
	for _, file := range loadJSONFiles(t, "official") {
		var f officialFixture
		readJSON(t, file, &f)
		thr := NewThread("official")
		if len(f.Input) > 0 {
			var in codec.RunInput
			if err := codec.DecodeRunInput(f.Input, &in); err != nil {
				t.Fatalf("%s: input: %v", file, err)
			}
			if err := thr.SetInput(&in); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases, give{name: "official/" + filepath.Base(file), thread: thr, events: f.Stream})
	}
	memDiffers := false
	for _, tt := range cases {
		r := &corpusRun{thread: tt.thread, fatalIdx: -1, proto: tt.proto}
		for i := range tt.events {
			ok := feedRange(r, tt.events, i, i+1)
			re, err := LoadCheckpoint(tt.thread.AppendCheckpoint(nil))
			if err != nil {
				t.Fatalf("%s: event %d: %v", tt.name, i, err)
			}
			if got, want := re.ViewSize(), tt.thread.ViewSize(); got != want {
				t.Errorf("%s: after event %d: ViewSize %d reloaded, %d live", tt.name, i, got, want)
				break
			}
			memDiffers = memDiffers || re.MemSize() != tt.thread.MemSize()
			if !ok {
				break
			}
		}
	}
	if !memDiffers {
		t.Error("MemSize was the same live and reloaded throughout: the streams do not exercise what ViewSize is for")
	}
}
