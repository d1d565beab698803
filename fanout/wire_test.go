package fanout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

func TestParseCursor(t *testing.T) {
	tests := []struct {
		give string
		want Cursor
	}{
		{"12", Cursor{Seq: 12, Index: -1, Valid: true}},
		{"0", Cursor{Seq: 0, Index: -1, Valid: true}},
		{"12.3", Cursor{Seq: 12, Index: 3, Valid: true}},
		{"12.0", Cursor{Seq: 12, Index: 0, Valid: true}},
		{"12.snap", Cursor{}},
		{"", Cursor{}},
		{"-1", Cursor{}},
		{"12.-1", Cursor{}},
		{"1.2.3", Cursor{}},
		{"abc", Cursor{}},
		{"18446744073709551616", Cursor{}}, // overflows uint64
		{" 12", Cursor{}},
		{strings.Repeat("1", 50), Cursor{}},
	}
	for _, tt := range tests {
		if got := ParseCursor(tt.give); got != tt.want {
			t.Errorf("ParseCursor(%q) = %+v, want %+v", tt.give, got, tt.want)
		}
	}
}

// readSSE parses b as an SSE client would and returns (id, data) pairs of
// the blocks that carry data or an id.
func readSSE(t testing.TB, b []byte) [][2]string {
	t.Helper()
	c := &sseClient{br: bufio.NewReader(bytes.NewReader(b))}
	var out [][2]string
	for {
		m, err := c.next()
		if err != nil {
			return out
		}
		if m.data != "" || m.hasID {
			out = append(out, [2]string{m.id, m.data})
		}
	}
}

func testFrame(seq, prev uint64, events ...string) *frame {
	f := &frame{seq: seq, prev: prev, changes: json.RawMessage(`{"x":1}`)}
	for _, e := range events {
		f.events = append(f.events, json.RawMessage(e))
	}
	return f
}

func TestEncodeFrame(t *testing.T) {
	f := testFrame(7, 3, `{"a":1}`, `{"b":2}`, `{"c":3}`)
	tests := []struct {
		v    Variant
		want string
	}{
		{AguiSSE, "id: 7.0\ndata: {\"a\":1}\n\nid: 7.1\ndata: {\"b\":2}\n\nid: 7\ndata: {\"c\":3}\n\n"},
		{ViewSSE, "id: 7\ndata: {\"type\":\"changes\",\"seq\":7,\"prev\":3,\"changes\":{\"x\":1}}\n\n"},
		{AguiWS, `{"a":1}|{"b":2}|{"c":3}`},
		{ViewWS, `{"type":"changes","seq":7,"prev":3,"changes":{"x":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.v.String(), func(t *testing.T) {
			got := string(bytes.Join(encodeFrame(f, tt.v), []byte("|")))
			if got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	// A frame without changes still tells view clients where they are.
	if got := string(changesPayload(testFrame(2, 1))); got != `{"type":"changes","seq":2,"prev":1,"changes":{"x":1}}` {
		t.Fatalf("changes payload %q", got)
	}
	f.changes = nil
	if got := string(changesPayload(f)); got != `{"type":"changes","seq":7,"prev":3,"changes":null}` {
		t.Fatalf("nil changes payload %q", got)
	}
	if got := string(encodePartial(testFrame(9, 3, `{"a":1}`, `{"b":2}`, `{"c":3}`), AguiSSE, 0)[0]); got != "id: 9.1\ndata: {\"b\":2}\n\nid: 9\ndata: {\"c\":3}\n\n" {
		t.Fatalf("partial %q", got)
	}
}

func TestEncodeSnapshot(t *testing.T) {
	sn := &snapshot{seq: 5, view: json.RawMessage(`{"v":1}`), events: []json.RawMessage{json.RawMessage(`{"r":1}`), json.RawMessage(`{"m":2}`)}}
	tests := []struct {
		name string
		give *snapshot
		v    Variant
		want string
	}{
		{"agui sse", sn, AguiSSE, "id: 5.snap\ndata: {\"r\":1}\n\nid: 5\ndata: {\"m\":2}\n\n"},
		{"agui sse empty", &snapshot{seq: 4, view: sn.view}, AguiSSE, "id: 4\n\n"},
		{"view sse", sn, ViewSSE, "id: 5\ndata: {\"type\":\"view\",\"seq\":5,\"view\":{\"v\":1}}\n\n"},
		{"agui ws", sn, AguiWS, `{"r":1}|{"m":2}`},
		{"view ws", sn, ViewWS, `{"type":"view","seq":5,"view":{"v":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(bytes.Join(encodeSnapshot(tt.give, tt.v), []byte("|"))); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	// The id-only block of an empty snapshot sets the cursor and dispatches nothing.
	if got := readSSE(t, encodeSnapshot(&snapshot{seq: 4}, AguiSSE)[0]); len(got) != 1 || got[0] != [2]string{"4", ""} {
		t.Fatalf("id-only block read as %q", got)
	}
}

func TestAppendData(t *testing.T) {
	tests := []struct {
		give, want string // want: what an SSE client's data buffer holds
	}{
		{`{"a":1}`, `{"a":1}`},
		{"{\n  \"a\": 1\n}", "{\n  \"a\": 1\n}"},
		{"{\r\n\"a\":1\r\n}", "{\n\"a\":1\n}"},
		{"{\r\"a\":1}", "{\n\"a\":1}"},
		{"{\"a\":1}\n", "{\"a\":1}"},
	}
	for _, tt := range tests {
		got := readSSE(t, appendData(nil, []byte(tt.give)))
		if len(got) != 1 || got[0][1] != tt.want {
			t.Errorf("appendData(%q) read back as %q, want %q", tt.give, got, tt.want)
		}
	}
}

func frameMsg(seq, prev, body string) *nats.Msg {
	h := nats.Header{}
	if seq != "" {
		h.Set(wire.HeaderSeq, seq)
	}
	if prev != "" {
		h.Set(wire.HeaderPrev, prev)
	}
	return &nats.Msg{Header: h, Data: []byte(body)}
}

func TestDecodeFrame(t *testing.T) {
	tests := []struct {
		name       string
		seq, prev  string
		body       string
		wantErr    error
		wantEvents int
		wantTS     int64
	}{
		{"ok", "5", "2", `{"seq":5,"prev":2,"events":[{"type":"X","timestamp":1700000000000},{"type":"Y"}],"changes":{}}`, nil, 2, 1700000000000},
		{"first frame", "1", "0", `{"events":[]}`, nil, 0, 0},
		{"no seq", "", "0", `{}`, ErrBadFrame, 0, 0},
		{"no prev", "3", "", `{}`, ErrBadFrame, 0, 0},
		{"prev not before seq", "3", "3", `{}`, ErrBadFrame, 0, 0},
		{"negative", "-3", "0", `{}`, ErrBadFrame, 0, 0},
		{"body not json", "3", "1", `{`, ErrBadFrame, 0, 0},
		{"events not an array", "3", "1", `{"events":{}}`, ErrBadFrame, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := decodeFrame(frameMsg(tt.seq, tt.prev, tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (len(f.events) != tt.wantEvents || f.eventTS != tt.wantTS) {
				t.Fatalf("frame %+v", f)
			}
		})
	}
}

func TestDecodeSnapshot(t *testing.T) {
	tests := []struct {
		name    string
		msg     *nats.Msg
		wantErr error
		wantSeq uint64
	}{
		{"ok", frameMsg("4", "", `{"seq":4,"status":"running","view":{},"events":[{"type":"X"}]}`), nil, 4},
		{"no header", &nats.Msg{Data: []byte(`{"seq":0,"view":{},"events":[]}`)}, nil, 0},
		{"error reply", &nats.Msg{Header: nats.Header{wire.HeaderErrorKind: {"busy"}, wire.HeaderError: {"queue full"}}}, ErrSnapshot, 0},
		{"not json", &nats.Msg{Data: []byte(`nope`)}, ErrBadSnapshot, 0},
		{"no view", &nats.Msg{Data: []byte(`{"seq":3}`)}, ErrBadSnapshot, 0},
		{"header disagrees", frameMsg("5", "", `{"seq":4,"view":{}}`), ErrBadSnapshot, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sn, err := decodeSnapshot(tt.msg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && sn.seq != tt.wantSeq {
				t.Fatalf("seq %d, want %d", sn.seq, tt.wantSeq)
			}
		})
	}
}

func TestRing(t *testing.T) {
	r := newRing(3)
	var evicted []uint64 // each push's evictions are the oldest, so count and last spell them
	push := func(seq uint64, size int) {
		if n, last := r.push(&frame{seq: seq, size: size}, 100); n > 0 {
			for s := last - uint64(n) + 1; s <= last; s++ {
				evicted = append(evicted, s)
			}
		}
	}
	push(1, 10)
	push(2, 10)
	push(3, 10)
	push(4, 10) // over the frame bound: 1 goes
	push(5, 60) // over the byte bound (10+10+10+60 > 100 with 3 frames): 2 goes too, then capacity
	var have []uint64
	r.each(func(f *frame) { have = append(have, f.seq) })
	if got, want := have, []uint64{3, 4, 5}; !equalU64(got, want) {
		t.Fatalf("ring %v, want %v (evicted %v)", got, want, evicted)
	}
	if !equalU64(evicted, []uint64{1, 2}) {
		t.Fatalf("evicted %v", evicted)
	}
	for _, tt := range []struct {
		seq  uint64
		want bool
	}{{3, true}, {4, true}, {5, true}, {2, false}, {6, false}} {
		if got := r.find(tt.seq) != nil; got != tt.want {
			t.Errorf("find(%d) = %v", tt.seq, got)
		}
	}
	push(6, 200) // bigger than the byte bound alone: kept, everything else goes
	have = have[:0]
	r.each(func(f *frame) { have = append(have, f.seq) })
	if !equalU64(have, []uint64{6}) {
		t.Fatalf("after a huge frame: %v", have)
	}
	r.reset()
	if r.n != 0 || r.bytes != 0 || r.find(6) != nil {
		t.Fatal("reset left frames")
	}
}

// TestRingGrows: a ring's buffer grows with its frames, from a few slots
// to its capacity and no further, keeping them in order through the
// wrap-around, and evicts at its capacity, not at its buffer's size.
func TestRingGrows(t *testing.T) {
	const capacity = 100
	r := newRing(capacity)
	if len(r.buf) > ringInitial {
		t.Fatalf("a new ring holds %d slots", len(r.buf))
	}
	evicted := 0
	for seq := uint64(1); seq <= 250; seq++ {
		n, _ := r.push(&frame{seq: seq, size: 1}, 1<<20)
		evicted += n
		if len(r.buf) > capacity || len(r.buf) < r.n {
			t.Fatalf("after %d frames: %d slots for %d frames", seq, len(r.buf), r.n)
		}
		first := uint64(1)
		if seq > capacity {
			first = seq - capacity + 1
		}
		for i := range r.n {
			if got := r.at(i).seq; got != first+uint64(i) {
				t.Fatalf("after %d frames: frame %d is %d, want %d", seq, i, got, first+uint64(i))
			}
		}
		if r.find(seq) == nil || (seq > capacity && r.find(first-1) != nil) {
			t.Fatalf("after %d frames: find disagrees with the ring", seq)
		}
	}
	if evicted != 150 || r.n != capacity {
		t.Fatalf("evicted %d, %d left; want 150 and %d", evicted, r.n, capacity)
	}
}

func TestRingTrim(t *testing.T) {
	r := newRing(8)
	for seq, size := range []int{0, 40, 30, 20, 10} {
		if seq > 0 {
			r.push(&frame{seq: uint64(seq), size: size}, 1000)
		}
	}
	seqs := func() (have []uint64) {
		r.each(func(f *frame) { have = append(have, f.seq) })
		return have
	}
	// Frames go oldest first, so how many went and the last one's seq
	// name them all: trim returns exactly that.
	if n, _ := r.trim(100); n != 0 || !equalU64(seqs(), []uint64{1, 2, 3, 4}) {
		t.Fatalf("trim within the bound evicted %d frames, left %v", n, seqs())
	}
	// 100 bytes: 1 (40) and 2 (30) go, 20+10 stay.
	if n, last := r.trim(35); n != 2 || last != 2 || !equalU64(seqs(), []uint64{3, 4}) || r.bytes != 30 {
		t.Fatalf("trim(35): evicted %d up to %d, left %v (%d bytes)", n, last, seqs(), r.bytes)
	}
	// The newest frame alone (10) is over: it goes too.
	if n, last := r.trim(9); n != 2 || last != 4 || r.n != 0 || r.bytes != 0 || r.find(4) != nil {
		t.Fatalf("trim(9): evicted %d up to %d, left %v (%d bytes)", n, last, seqs(), r.bytes)
	}
	// Around the end of the slot array: pushes after trims wrap start.
	for seq := uint64(5); seq <= 14; seq++ {
		r.push(&frame{seq: seq, size: 10}, 1000)
	}
	if !equalU64(seqs(), []uint64{7, 8, 9, 10, 11, 12, 13, 14}) {
		t.Fatalf("after wrapping pushes: %v", seqs())
	}
	if n, last := r.trim(25); n != 6 || last != 12 || !equalU64(seqs(), []uint64{13, 14}) || r.bytes != 20 ||
		r.find(13) == nil || r.find(12) != nil {
		t.Fatalf("trim(25) after wrapping: evicted %d up to %d, left %v (%d bytes)", n, last, seqs(), r.bytes)
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"1", "1.2", "1.snap", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseCursor(s)
		if !c.Valid {
			return
		}
		// A valid cursor prints back to an equivalent cursor.
		back := appendID(nil, c.Seq, 0, 1)
		if c.Index >= 0 {
			back = appendID(nil, c.Seq, c.Index, c.Index+2)
		}
		if got := ParseCursor(strings.TrimSuffix(strings.TrimPrefix(string(back), "id: "), "\n")); got != c {
			t.Fatalf("%q → %+v → %q → %+v", s, c, back, got)
		}
	})
}

// checkFrameByJSON checks decodeFrame against encoding/json: on a body
// encoding/json reads as an object whose member names are written plainly
// and once each (as ingest writes them; decodeFrame matches names as
// written), the frame holds the same events, byte for byte, and the same
// changes, and it is refused exactly when events is neither an array nor
// null.
func checkFrameByJSON(t *testing.T, body []byte) {
	t.Helper()
	members, err := membersByJSON(body)
	if err != nil {
		return // invalid JSON: the scanner checks structure only
	}
	seen := map[string]bool{}
	plain := scanObject(body, func(name, _ []byte) error {
		if bytes.IndexByte(name, '\\') >= 0 || seen[string(name)] {
			return errStop
		}
		seen[string(name)] = true
		return nil
	}) == nil
	if !plain {
		return
	}
	var want []json.RawMessage
	evs, hasEvents := members["events"]
	badEvents := hasEvents && evs != "null" && json.Unmarshal([]byte(evs), &want) != nil
	fr, err := decodeFrame(frameMsg("9", "4", string(body)))
	switch {
	case badEvents && err == nil:
		t.Fatalf("%.80q: accepted, but events %.40q is not an array", body, evs)
	case badEvents:
		return
	case err != nil:
		t.Fatalf("%.80q: %v; encoding/json reads it", body, err)
	}
	if len(fr.events) != len(want) {
		t.Fatalf("%.80q: %d events, encoding/json %d", body, len(fr.events), len(want))
	}
	for i := range want {
		if !bytes.Equal(fr.events[i], want[i]) {
			t.Fatalf("%.80q: event %d %.40q, encoding/json %.40q", body, i, fr.events[i], want[i])
		}
	}
	if string(fr.changes) != members["changes"] {
		t.Fatalf("%.80q: changes %.40q, encoding/json %.40q", body, fr.changes, members["changes"])
	}
}

// TestDecodeFrameByJSON: the frames ingest publishes for the pipeline's
// test threads, and edge cases, decode as encoding/json reads them.
func TestDecodeFrameByJSON(t *testing.T) {
	for _, s := range []string{
		`{}`, `{"events":null}`, `{"events":[]}`, ` { "events" : [ 1 , "a]" , {"b":[null]} ] , "changes" : {"x":"}"} } `,
		`{"tenant":"t","thread":"a\"b","seq":5,"prev":2,"status":"running","events":[{"type":"X","timestamp":17}],"changes":null}`,
		`{"events":"x"}`, `{"events":{}}`, `{"Events":[1]}`,
	} {
		checkFrameByJSON(t, []byte(s))
	}
	n := 0
	for _, body := range ingestFrames(t) {
		checkFrameByJSON(t, body)
		n++
	}
	if n == 0 {
		t.Fatal("ingest published no frames")
	}
}

// FuzzDecodeFrame: any body either fails with ErrBadFrame or gives a frame
// whose SSE encoding reads back, event by event, as the events (line
// breaks normalised as SSE defines), with ids ending in the frame's seq;
// and it decodes as encoding/json reads it (checkFrameByJSON).
func FuzzDecodeFrame(f *testing.F) {
	f.Add(`{"events":[{"type":"A"},{"type":"B"}],"changes":{}}`)
	f.Add("{\"events\":[{\r\n\"a\":\n1}]}")
	f.Add(`{"events":[]}`)
	f.Add(`{"events":"x","changes":[1,{"a":"\\"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		checkFrameByJSON(t, []byte(body))
		fr, err := decodeFrame(frameMsg("9", "4", body))
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error without ErrBadFrame: %v", err)
			}
			return
		}
		got := readSSE(t, encodeFrame(fr, AguiSSE)[0])
		var want []string
		for _, ev := range fr.events {
			s := strings.ReplaceAll(string(ev), "\r\n", "\n")
			s = strings.ReplaceAll(s, "\r", "\n")
			s = strings.TrimSuffix(s, "\n")
			if s == "" {
				continue // an empty payload is no SSE message
			}
			want = append(want, s)
		}
		var data []string
		for _, g := range got {
			if g[1] != "" {
				data = append(data, g[1])
			}
		}
		if strings.Join(data, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("events %q read back as %q", want, data)
		}
		if len(fr.events) > 0 && len(got) > 0 && got[len(got)-1][0] != "9" {
			t.Fatalf("last id %q, want 9", got[len(got)-1][0])
		}
	})
}

// ingestFrames returns the bodies of the frames the real ingest publishes
// for a stream of this package's tests (backpressureStream: appends, tool
// call arguments, state patches, run boundaries), assembled from parts.
func ingestFrames(t *testing.T) [][]byte {
	t.Helper()
	ns := startNATS(t)
	startIngest(t, ns, 1)
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	const thread = "frames"
	nc := connect(t, ns)
	var asm wire.Assembler
	bodies := make(chan []byte, 1<<14)
	if _, err := nc.Subscribe(wire.ViewSubject("acme", wire.EncodeThread(thread)), func(part *nats.Msg) {
		if m, err := asm.Add(part); err == nil && m != nil {
			bodies <- m.Data
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	last := publishAll(t, js, thread, backpressureStream(thread, 2, 60), 0)
	var out [][]byte
	testsupport.WaitFor(t, 20*time.Second, "the last frame", func() bool {
		for {
			select {
			case b := <-bodies:
				out = append(out, b)
			default:
				if len(out) == 0 {
					return false
				}
				f, err := wire.ParseFrame(out[len(out)-1])
				return err == nil && f.Seq == last
			}
		}
	})
	return out
}
