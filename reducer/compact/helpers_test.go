package compact

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/reducer"
)

// testCase is one stream to check the compaction invariant on.
type testCase struct {
	name   string
	input  *codec.RunInput // nil: an empty thread
	events []*codec.Event  // owned (cloned) events, in order
}

// decodeEvents decodes raw events one by one, as the pipeline does: an event
// the codec drops never reaches the reducer, and the stream ends at the first
// event the codec rejects as fatal (everything after it would be refused).
// The returned events own their memory.
func decodeEvents(tb testing.TB, raws [][]byte) []*codec.Event {
	tb.Helper()
	var (
		d   codec.Decoder
		ev  codec.Event
		out []*codec.Event
	)
	for _, raw := range raws {
		err := d.Decode(raw, &ev)
		if err != nil {
			var ce *codec.Error
			if errors.As(err, &ce) && ce.Verdict != codec.Fatal {
				continue
			}
			break
		}
		out = append(out, ev.Clone())
	}
	return out
}

// jsonlLines splits JSONL text into its non-blank lines.
func jsonlLines(data []byte) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) > 0 {
			out = append(out, append([]byte(nil), line...))
		}
	}
	return out
}

// loadConformance loads every case of cases/ and official/ with its starting
// input.
func loadConformance(tb testing.TB) []testCase {
	tb.Helper()
	conformanceDir := testsupport.ConformanceDir(tb)
	var out []testCase
	for _, sub := range []string{"cases", "official"} {
		files, err := filepath.Glob(filepath.Join(conformanceDir, sub, "*.json"))
		if err != nil || len(files) == 0 {
			tb.Fatalf("no conformance files under %s/%s (err %v)", conformanceDir, sub, err)
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			var doc struct {
				Events  []json.RawMessage `json:"events"`
				Stream  []json.RawMessage `json:"stream"`
				Initial *struct {
					Messages json.RawMessage `json:"messages"`
					State    json.RawMessage `json:"state"`
				} `json:"initial"`
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				tb.Fatalf("%s: %v", f, err)
			}
			raws := doc.Events
			if sub == "official" {
				raws = doc.Stream
			}
			rb := make([][]byte, len(raws))
			for i, r := range raws {
				rb[i] = r
			}
			c := testCase{name: sub + "/" + strings.TrimSuffix(filepath.Base(f), ".json"), events: decodeEvents(tb, rb)}
			var inRaw []byte
			switch {
			case doc.Initial != nil:
				// A RunAgentInput carrying the case's starting messages and state.
				m := map[string]json.RawMessage{
					"threadId": json.RawMessage(`"t"`), "runId": json.RawMessage(`"r"`),
					"tools": json.RawMessage(`[]`), "context": json.RawMessage(`[]`),
					"forwardedProps": json.RawMessage(`{}`), "messages": json.RawMessage(`[]`),
				}
				if len(doc.Initial.Messages) > 0 {
					m["messages"] = doc.Initial.Messages
				}
				if len(doc.Initial.State) > 0 {
					m["state"] = doc.Initial.State
				}
				inRaw, _ = json.Marshal(m)
			case len(doc.Input) > 0 && string(doc.Input) != "null":
				inRaw = doc.Input
			}
			if inRaw != nil {
				in := new(codec.RunInput)
				if err := codec.DecodeRunInput(inRaw, in); err != nil {
					tb.Fatalf("%s: input: %v", f, err)
				}
				c.input = in // views into inRaw, which stays alive with the case
			}
			out = append(out, c)
		}
	}
	return out
}

// loadFixture reads a gzipped JSONL stream from testdata/compact.
func loadFixture(tb testing.TB, name string) testCase {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "compact", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		tb.Fatal(err)
	}
	return testCase{name: name, events: decodeEvents(tb, jsonlLines(buf.Bytes()))}
}

// foldView applies events to a thread started from input and returns the
// view, as a generic JSON value with the stream sequence removed (compaction
// changes how many events there are, by design), plus the number of events
// that were not applied cleanly.
func foldView(tb testing.TB, input *codec.RunInput, events []*codec.Event) (map[string]any, int) {
	tb.Helper()
	th := reducer.NewThread("compact-test")
	if input != nil {
		if err := th.SetInput(input); err != nil {
			tb.Fatalf("SetInput: %v", err)
		}
	}
	unclean := 0
	for i, ev := range events {
		res := th.Apply(uint64(i)+1, ev)
		if res.Fatal != nil || len(res.Warnings) > 0 {
			unclean++
		}
	}
	var v map[string]any
	// Error texts name the stream sequence of the offending event, which
	// compaction renumbers.
	raw := seqRE.ReplaceAll(th.AppendView(nil), []byte("seq N"))
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Fatalf("view is not JSON: %v\n%s", err, raw)
	}
	delete(v, "seq")
	return v, unclean
}

var seqRE = regexp.MustCompile(`seq [0-9]+`)

// checkEquivalent fails unless the compacted stream folds into the same view
// as the original.
func checkEquivalent(tb testing.TB, name string, input *codec.RunInput, orig, compacted []*codec.Event) {
	tb.Helper()
	want, _ := foldView(tb, input, orig)
	got, _ := foldView(tb, input, compacted)
	if !reflect.DeepEqual(want, got) {
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		tb.Fatalf("%s: compacted stream (%d of %d events) gives another view\nwant %s\n got %s\ncompacted:\n%s",
			name, len(compacted), len(orig), w, g, encodeJSONL(compacted, 60))
	}
}

// encodeJSONL renders at most max events as JSONL, for failure messages.
func encodeJSONL(events []*codec.Event, max int) string {
	var b []byte
	for i, ev := range events {
		if i == max {
			b = append(b, "...\n"...)
			break
		}
		b = codec.AppendEvent(b, ev)
		b = append(b, '\n')
	}
	return string(b)
}
