package fanout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/reducer"
)

// coalesceStream is one AG-UI stream for the consolidation tests, its events
// encoded as the pipeline puts them in frames.
type coalesceStream struct {
	name   string
	events [][]byte
}

// coalesceStreams returns the conformance cases that start from an empty
// thread (a fanout thread always does) and, when node is installed, seeded
// random streams of tools/streamgen.
func coalesceStreams(t *testing.T) []coalesceStream {
	t.Helper()
	var out []coalesceStream
	dir := testsupport.ConformanceDir(t)
	for _, sub := range []string{"cases", "official"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no conformance files under %s/%s (err %v)", dir, sub, err)
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Events  []json.RawMessage `json:"events"`
				Stream  []json.RawMessage `json:"stream"`
				Initial json.RawMessage   `json:"initial"`
				Input   json.RawMessage   `json:"input"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(doc.Initial) > 0 || (len(doc.Input) > 0 && string(doc.Input) != "null") {
				continue
			}
			raws := doc.Events
			if sub == "official" {
				raws = doc.Stream
			}
			out = append(out, coalesceStream{name: sub + "/" + strings.TrimSuffix(filepath.Base(f), ".json"), events: canonical(raws)})
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Log("node not installed: the random streams of tools/streamgen are not checked")
		return out
	}
	gen := testsupport.Streamgen(t)
	for _, s := range []struct {
		seed string
		args []string
	}{
		{"bp-1", []string{"--events", "2000"}},
		{"bp-2", []string{"--events", "2000", "--verbosity", "6"}},
		{"bp-3", []string{"--events", "2000", "--no-chunks"}},
		{"bp-4", []string{"--events", "3000", "--run-length", "200,600"}},
	} {
		stream := testsupport.Generate(t, gen, append([]string{"--seed", s.seed}, s.args...)...)
		var raws []json.RawMessage
		sc := bufio.NewScanner(bytes.NewReader(stream))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				raws = append(raws, append(json.RawMessage(nil), line...))
			}
		}
		out = append(out, coalesceStream{name: "streamgen/" + s.seed, events: canonical(raws)})
	}
	return out
}

// canonical decodes raws as the pipeline does (an event the codec drops
// never reaches a frame; the stream ends at one it rejects) and encodes
// them again.
func canonical(raws []json.RawMessage) [][]byte {
	var d codec.Decoder
	var ev codec.Event
	var out [][]byte
	for _, raw := range raws {
		if err := d.Decode(raw, &ev); err != nil {
			var ce *codec.Error
			if errors.As(err, &ce) && ce.Verdict != codec.Fatal {
				continue
			}
			break
		}
		out = append(out, codec.AppendEvent(nil, &ev))
	}
	return out
}

// framesOf cuts events into frames of 1 to 6 events, with seqs 1, 2, ...
func framesOf(events [][]byte, rng *rand.Rand) []*frame {
	var frames []*frame
	for i := 0; i < len(events); {
		n := min(1+rng.IntN(6), len(events)-i)
		fr := &frame{seq: uint64(len(frames) + 1), prev: uint64(len(frames))}
		for _, e := range events[i : i+n] {
			fr.events = append(fr.events, e)
			fr.size += len(e)
		}
		frames = append(frames, fr)
		i += n
	}
	return frames
}

// viewOf folds raw events into a new thread, as an AG-UI client that joined
// at the thread's start does, and returns the view without the stream
// sequence (consolidation changes how many events there are).
func viewOf(t *testing.T, events [][]byte) map[string]any {
	t.Helper()
	th := reducer.NewThread("t")
	var d codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		if err := d.Decode(raw, &ev); err != nil {
			t.Fatalf("event %d does not decode: %v\n%s", i, err, raw)
		}
		th.Apply(uint64(i)+1, &ev)
	}
	var v map[string]any
	if err := json.Unmarshal(seqRE.ReplaceAll(th.AppendView(nil), []byte("seq N")), &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "seq")
	return v
}

var seqRE = regexp.MustCompile(`seq [0-9]+`)

// A backlog of frames consolidated for a slow subscriber, in the middle of
// its stream, gives it the view of a subscriber that got every frame as it
// was, at the backlog's end: on the conformance cases and on random
// streams, for random frame cuts and backlogs. The reference is the reducer folding the original
// events; the verdicts the consolidation relies on come from the feed's
// fold (verdictFold), as in the hub. Both encodings are checked: WebSocket
// (one event per message) and SSE (one message per event, ids "<seq>.c"
// but the last, "<seq>").
func TestCoalesceEventsDifferential(t *testing.T) {
	var in, out int
	for _, s := range coalesceStreams(t) {
		rng := rand.New(rand.NewPCG(uint64(len(s.events)), 7))
		frames := framesOf(s.events, rng)
		if len(frames) < 2 {
			continue
		}
		vf := &verdictFold{th: reducer.NewThread("t")}
		for _, fr := range frames {
			if !vf.follow(fr) {
				t.Fatalf("%s: the verdict fold stopped at frame %d", s.name, fr.seq)
			}
		}
		for trial := 0; trial < 8; trial++ {
			j := rng.IntN(len(frames) - 1)
			k := j + 2 + rng.IntN(len(frames)-j-1)
			if trial == 0 {
				j, k = 0, len(frames) // the whole stream
			}
			msgs, err := coalesceEvents(frames[j:k], AguiWS)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			// Compared where the backlog ends: later events restate what
			// they change (snapshots), and would hide a wrong compaction.
			var got, wantK [][]byte
			for _, fr := range frames[:k] {
				for _, e := range fr.events {
					if fr.seq <= uint64(j) {
						got = append(got, e)
					}
					wantK = append(wantK, e)
				}
			}
			got = append(got, msgs...)
			if g, w := viewOf(t, got), viewOf(t, wantK); !reflect.DeepEqual(g, w) {
				wj, _ := json.Marshal(w)
				gj, _ := json.Marshal(g)
				t.Fatalf("%s: frames %d..%d consolidated give another view\nwant %.2000s\n got %.2000s", s.name, j+1, k, wj, gj)
			}
			n := 0
			for _, fr := range frames[j:k] {
				n += len(fr.events)
			}
			in, out = in+n, out+len(msgs)
			checkCoalescedSSE(t, s.name, frames[j:k], msgs)
		}
	}
	t.Logf("%d events consolidated into %d", in, out)
	if out*2 > in {
		t.Errorf("consolidation kept %d of %d events: the streams are made of deltas that join", out, in)
	}
}

// checkCoalescedSSE checks the SSE encoding of frames against msgs, their
// WebSocket encoding: the same events, each its own SSE message, the last
// with the id of the last frame and the others a non-resumable one.
func checkCoalescedSSE(t *testing.T, name string, frames []*frame, msgs [][]byte) {
	t.Helper()
	sse, err := coalesceEvents(frames, AguiSSE)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) == 0 {
		if len(sse) != 0 {
			t.Fatalf("%s: SSE messages for no event", name)
		}
		return
	}
	last := strconv.FormatUint(frames[len(frames)-1].seq, 10)
	r := testsupport.NewSSEReader(bytes.NewReader(sse[0]))
	for i, m := range msgs {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("%s: SSE message %d: %v", name, i, err)
		}
		wantID := last + ".c"
		if i == len(msgs)-1 {
			wantID = last
		}
		if ev.ID != wantID || ev.Data != string(m) {
			t.Fatalf("%s: SSE message %d is id %q data %.200s, want id %q data %.200s", name, i, ev.ID, ev.Data, wantID, m)
		}
		if c := ParseCursor(ev.ID); c.Valid != (i == len(msgs)-1) {
			t.Fatalf("%s: id %q resumable %v", name, ev.ID, c.Valid)
		}
	}
}
