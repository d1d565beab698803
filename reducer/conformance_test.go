package reducer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/jsondoc"
)

// corpusRun is what one stream did to a Thread.
type corpusRun struct {
	thread    *Thread
	warnIdx   []int // input index of every warning (codec and reducer)
	warnText  []string
	fatalIdx  int // -1 when the stream was accepted
	fatal     error
	eventsFed int
	// proto is the AG-UI version the codec decodes as: "1.0" for cases/
	// (a strict 1.0 consumer's expectations: a "1.1" declaration is newer),
	// "" (the codec's default, 1.1) for official/ (written against 1.1).
	proto string
}

// feed runs raw events through the codec and the reducer the way the
// pipeline does: codec warnings (strip, shim, drop) are counted with Warn, a
// codec Fatal with Reject, then Apply. It stops at the first fatal verdict.
func feed(t *testing.T, thr *Thread, events []json.RawMessage) *corpusRun {
	t.Helper()
	out := &corpusRun{thread: thr, fatalIdx: -1}
	feedRange(out, events, 0, len(events))
	return out
}

// feedRange feeds events[lo:hi] (seq = index+1) into out.thread, recording
// into out; it returns false after a fatal verdict.
func feedRange(out *corpusRun, events []json.RawMessage, lo, hi int) bool {
	thr := out.thread
	var dec codec.Decoder
	if out.proto != "" {
		if err := dec.SetProtocolVersion(out.proto); err != nil {
			panic(err)
		}
	}
	var ev codec.Event
	var buf []byte
	for i := lo; i < hi; i++ {
		seq := uint64(i + 1)
		out.eventsFed = i + 1
		// Decode from a buffer that is poisoned after each event, so that a
		// view the reducer kept too long shows '#' instead of passing.
		for j := range buf {
			buf[j] = '#'
		}
		buf = append(buf[:0], events[i]...)
		err := dec.Decode(buf, &ev)
		for _, w := range dec.Warnings() {
			thr.Warn(seq, CodecWarning(seq, w))
			out.warnIdx = append(out.warnIdx, i)
			out.warnText = append(out.warnText, w.Error())
		}
		if err != nil {
			var ce *codec.Error
			if errors.As(err, &ce) && ce.Verdict == codec.Drop {
				thr.Warn(seq, CodecWarning(seq, ce))
				out.warnIdx = append(out.warnIdx, i)
				out.warnText = append(out.warnText, ce.Error())
				continue
			}
			thr.Reject(seq, err)
			out.fatalIdx, out.fatal = i, err
			return false
		}
		res := thr.Apply(seq, &ev)
		for _, w := range res.Warnings {
			out.warnIdx = append(out.warnIdx, i)
			out.warnText = append(out.warnText, w.Message)
		}
		if res.Fatal != nil {
			out.fatalIdx, out.fatal = i, res.Fatal
			return false
		}
	}
	return true
}

// corpusCase is a file of conformance/cases.
type corpusCase struct {
	Name     string            `json:"name"`
	Initial  *corpusInitial    `json:"initial"`
	Events   []json.RawMessage `json:"events"`
	Expected struct {
		Messages json.RawMessage `json:"messages"`
		State    json.RawMessage `json:"state"`
	} `json:"expected"`
	ExpectedWarnings       int     `json:"expectedWarnings"`
	ExpectedWarningIndices []int   `json:"expectedWarningIndices"`
	ExpectedError          *string `json:"expectedError"`
	ExpectedErrorIndex     *int    `json:"expectedErrorIndex"`
}

type corpusInitial struct {
	Messages json.RawMessage `json:"messages"`
	State    json.RawMessage `json:"state"`
}

// startThread returns a Thread starting from initial (nil: empty).
func startThread(t *testing.T, initial *corpusInitial) *Thread {
	t.Helper()
	thr := NewThread("thread-1")
	if initial == nil {
		return thr
	}
	in := &codec.RunInput{}
	if len(initial.Messages) > 0 {
		var dec codec.Decoder
		msgs, err := dec.DecodeMessages(initial.Messages)
		if err != nil {
			t.Fatalf("initial messages: %v", err)
		}
		in.Messages = codec.CloneMessages(msgs)
	}
	if len(initial.State) > 0 {
		in.State = codec.Raw(initial.State)
	}
	if err := thr.SetInput(in); err != nil {
		t.Fatalf("SetInput: %v", err)
	}
	return thr
}

func loadJSONFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testsupport.ConformanceDir(t), dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance files in %s (err %v)", dir, err)
	}
	sort.Strings(files)
	return files
}

func TestConformanceCases(t *testing.T) {
	for _, file := range loadJSONFiles(t, "cases") {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			var c corpusCase
			readJSON(t, file, &c)
			r := &corpusRun{thread: startThread(t, c.Initial), fatalIdx: -1, proto: "1.0"}
			feedRange(r, c.Events, 0, len(c.Events))
			checkCase(t, &c, r)
		})
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func checkCase(t *testing.T, c *corpusCase, r *corpusRun) {
	t.Helper()
	wantFatal := c.ExpectedError != nil
	switch {
	case wantFatal && r.fatalIdx < 0:
		t.Errorf("want fatal at event %d (%s), stream accepted", *c.ExpectedErrorIndex, *c.ExpectedError)
	case !wantFatal && r.fatalIdx >= 0:
		t.Errorf("want no fatal, got one at event %d: %v", r.fatalIdx, r.fatal)
	case wantFatal && c.ExpectedErrorIndex != nil && r.fatalIdx != *c.ExpectedErrorIndex:
		t.Errorf("fatal at event %d (%v), want at %d", r.fatalIdx, r.fatal, *c.ExpectedErrorIndex)
	}
	if len(r.warnIdx) != c.ExpectedWarnings {
		t.Errorf("warnings = %d at %v %q, want %d at %v", len(r.warnIdx), r.warnIdx, r.warnText,
			c.ExpectedWarnings, c.ExpectedWarningIndices)
	} else if c.ExpectedWarningIndices != nil && !slices.Equal(r.warnIdx, c.ExpectedWarningIndices) {
		t.Errorf("warning indices = %v, want %v", r.warnIdx, c.ExpectedWarningIndices)
	}
	if got := r.thread.Warnings(); got != uint64(len(r.warnIdx)) {
		t.Errorf("view counts %d warnings, stream produced %d", got, len(r.warnIdx))
	}
	jsonEqual(t, "messages", r.thread.AppendMessages(nil), c.Expected.Messages)
	jsonEqual(t, "state", r.thread.AppendState(nil), c.Expected.State)
	// The whole view must be valid JSON too.
	var v map[string]any
	if err := json.Unmarshal(r.thread.AppendView(nil), &v); err != nil {
		t.Errorf("view is not JSON: %v", err)
	}
}

func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	eq, err := jsondoc.Equal(got, want)
	if err != nil {
		t.Fatalf("%s: %v\ngot  %s\nwant %s", what, err, got, want)
	}
	if !eq {
		t.Errorf("%s differ\ngot  %s\nwant %s", what, got, want)
	}
}

// officialFixture is a file of conformance/official (the protocol's own
// fixtures); only the keys a pipeline consumer can show are checked.
type officialFixture struct {
	Stream []json.RawMessage `json:"stream"`
	Input  json.RawMessage   `json:"input"`
	Expect struct {
		Outcome      string          `json:"outcome"`
		MessageCount *int            `json:"messageCount"`
		Messages     json.RawMessage `json:"messages"`
		State        json.RawMessage `json:"state"`
		NoWarnings   bool            `json:"noWarnings"`
		Warnings     []string        `json:"warnings"`
		RunError     *string         `json:"runError"`
	} `json:"expect"`
}

func TestConformanceOfficial(t *testing.T) {
	for _, file := range loadJSONFiles(t, "official") {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			var f officialFixture
			readJSON(t, file, &f)
			thr := NewThread("official")
			if len(f.Input) > 0 {
				var in codec.RunInput
				if err := codec.DecodeRunInput(f.Input, &in); err != nil {
					t.Fatalf("input: %v", err)
				}
				if err := thr.SetInput(&in); err != nil {
					t.Fatal(err)
				}
			}
			r := feed(t, thr, f.Stream)
			checkOfficial(t, &f, r)
		})
	}
}

func checkOfficial(t *testing.T, f *officialFixture, r *corpusRun) {
	t.Helper()
	x := &f.Expect
	switch x.Outcome {
	case "completed":
		if r.fatalIdx >= 0 {
			t.Errorf("want completed, rejected at event %d: %v", r.fatalIdx, r.fatal)
		}
	case "failed":
		if r.fatalIdx < 0 {
			t.Errorf("want failed, stream accepted")
		}
	default:
		t.Fatalf("unknown outcome %q", x.Outcome)
	}
	if x.NoWarnings && len(r.warnIdx) > 0 {
		t.Errorf("want no warnings, got %q", r.warnText)
	}
	if len(x.Warnings) > 0 && len(r.warnIdx) == 0 {
		t.Errorf("want warnings (%q), got none", x.Warnings)
	}
	var msgs []any
	if err := json.Unmarshal(r.thread.AppendMessages(nil), &msgs); err != nil {
		t.Fatalf("messages are not JSON: %v", err)
	}
	if x.MessageCount != nil && len(msgs) != *x.MessageCount {
		t.Errorf("message count = %d, want %d", len(msgs), *x.MessageCount)
	}
	if len(x.Messages) > 0 {
		var want any
		mustUnmarshal(t, x.Messages, &want)
		if path, ok := subset(msgs, want); !ok {
			t.Errorf("messages differ at %s\ngot  %s\nwant %s", path, r.thread.AppendMessages(nil), x.Messages)
		}
	}
	if len(x.State) > 0 {
		var got, want any
		mustUnmarshal(t, r.thread.AppendState(nil), &got)
		mustUnmarshal(t, x.State, &want)
		if path, ok := subset(got, want); !ok {
			t.Errorf("state differs at %s\ngot  %s\nwant %s", path, r.thread.AppendState(nil), x.State)
		}
	}
	if x.RunError != nil {
		var view struct {
			Runs []struct {
				Error *struct{ Message string } `json:"error"`
			} `json:"runs"`
		}
		mustUnmarshal(t, r.thread.AppendView(nil), &view)
		found := false
		for _, run := range view.Runs {
			found = found || run.Error != nil && run.Error.Message == *x.RunError
		}
		if !found {
			t.Errorf("no run reports the producer's error %q: %s", *x.RunError, r.thread.AppendView(nil))
		}
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// subset reports whether got matches want the way the official fixtures
// compare: arrays must have the same length and match element-wise; objects
// are compared only on the keys want names; scalars must be equal.
func subset(got, want any) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return "", false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return "." + k + " (absent)", false
			}
			if p, ok := subset(gv, wv); !ok {
				return "." + k + p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return " (array length)", false
		}
		for i := range w {
			if p, ok := subset(g[i], w[i]); !ok {
				return "[" + itoa(i) + "]" + p, false
			}
		}
		return "", true
	}
	return "", got == want
}

// codecDecoderForTests sets a RunAgentInput (official fixtures' input).
type codecDecoderForTests struct{}

func (codecDecoderForTests) setInput(t *testing.T, thr *Thread, raw json.RawMessage) {
	t.Helper()
	var in codec.RunInput
	if err := codec.DecodeRunInput(raw, &in); err != nil {
		t.Fatalf("input: %v", err)
	}
	if err := thr.SetInput(&in); err != nil {
		t.Fatal(err)
	}
}
