package codec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bytedance/sonic"
	sonicutf8 "github.com/bytedance/sonic/utf8"
	"github.com/valyala/bytebufferpool"
)

// testdata/mix.jsonl is 5000 events of one thread made by
// tools/streamgen (node gen.mjs random --seed 42 --events 5000
// --verbosity 6): mostly TEXT_MESSAGE_CONTENT/CHUNK with short deltas, tool
// call args, reasoning, state and activity snapshots/deltas, lifecycle.
func loadMix(tb testing.TB) [][]byte {
	tb.Helper()
	f, err := os.Open("testdata/mix.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func totalBytes(evs [][]byte) int64 {
	var n int64
	for _, e := range evs {
		n += int64(len(e))
	}
	return n
}

// stdEvent is the baseline: the same event as plain structs for
// encoding/json (and sonic), with open payloads kept as json.RawMessage.
// It validates nothing beyond JSON syntax and Go types.
type stdEvent struct {
	Type                string          `json:"type"`
	Timestamp           *int64          `json:"timestamp,omitempty"`
	RawEvent            json.RawMessage `json:"rawEvent,omitempty"`
	Metadata            json.RawMessage `json:"metadata,omitempty"`
	SubagentRunID       *string         `json:"subagentRunId,omitempty"`
	ThreadID            string          `json:"threadId,omitempty"`
	RunID               string          `json:"runId,omitempty"`
	ParentRunID         *string         `json:"parentRunId,omitempty"`
	ProtocolVersion     *string         `json:"protocolVersion,omitempty"`
	Input               *stdInput       `json:"input,omitempty"`
	Result              json.RawMessage `json:"result,omitempty"`
	Outcome             json.RawMessage `json:"outcome,omitempty"`
	Usage               []stdUsage      `json:"usage,omitempty"`
	Message             string          `json:"message,omitempty"`
	Code                *string         `json:"code,omitempty"`
	StepName            string          `json:"stepName,omitempty"`
	MessageID           *string         `json:"messageId,omitempty"`
	Role                *string         `json:"role,omitempty"`
	Name                *string         `json:"name,omitempty"`
	Delta               json.RawMessage `json:"delta,omitempty"` // string or patch
	ToolCallID          *string         `json:"toolCallId,omitempty"`
	ToolCallName        *string         `json:"toolCallName,omitempty"`
	ParentMessageID     *string         `json:"parentMessageId,omitempty"`
	Content             json.RawMessage `json:"content,omitempty"`
	Snapshot            json.RawMessage `json:"snapshot,omitempty"`
	Messages            []stdMessage    `json:"messages,omitempty"`
	ActivityType        string          `json:"activityType,omitempty"`
	Replace             *bool           `json:"replace,omitempty"`
	Patch               []stdOp         `json:"patch,omitempty"`
	Subtype             string          `json:"subtype,omitempty"`
	EntityID            string          `json:"entityId,omitempty"`
	EncryptedValue      string          `json:"encryptedValue,omitempty"`
	Description         *string         `json:"description,omitempty"`
	ParentSubagentRunID *string         `json:"parentSubagentRunId,omitempty"`
	ParentToolCallID    *string         `json:"parentToolCallId,omitempty"`
	Event               json.RawMessage `json:"event,omitempty"`
	Source              *string         `json:"source,omitempty"`
	Value               json.RawMessage `json:"value,omitempty"`
}

type stdOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

type stdUsage struct {
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	InputTokens  *int64 `json:"inputTokens,omitempty"`
	OutputTokens *int64 `json:"outputTokens,omitempty"`
	TotalTokens  *int64 `json:"totalTokens,omitempty"`
}

type stdMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       *string         `json:"name,omitempty"`
	ToolCallID *string         `json:"toolCallId,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

type stdInput struct {
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	State    json.RawMessage `json:"state,omitempty"`
	Messages []stdMessage    `json:"messages"`
}

// BenchmarkDecodeMix: our Decode (full validation, zero-copy) against
// encoding/json and sonic decoding into the structs above, on the mix.
func BenchmarkDecodeMix(b *testing.B) {
	evs := loadMix(b)
	size := totalBytes(evs)
	b.Run("impl=codec", func(b *testing.B) {
		var d Decoder
		var ev Event
		b.SetBytes(size / int64(len(evs)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := d.Decode(evs[i%len(evs)], &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=encoding_json", func(b *testing.B) {
		b.SetBytes(size / int64(len(evs)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var ev stdEvent
			if err := json.Unmarshal(evs[i%len(evs)], &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=sonic", func(b *testing.B) {
		b.SetBytes(size / int64(len(evs)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var ev stdEvent
			if err := sonic.Unmarshal(evs[i%len(evs)], &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeMixInterleaved measures codec and encoding/json in
// alternating slices of 250 events inside one benchmark, so that both see the
// same machine load (the shared 2-core build machine is far from quiet), and
// reports ns/event of each and their ratio ("x-vs-std", higher is better).
func BenchmarkDecodeMixInterleaved(b *testing.B) {
	evs := loadMix(b)
	var d Decoder
	var ev Event
	var tCodec, tStd time.Duration
	var n int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		lo := (i * 250) % len(evs)
		hi := min(lo+250, len(evs))
		t0 := time.Now()
		for _, e := range evs[lo:hi] {
			if err := d.Decode(e, &ev); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for _, e := range evs[lo:hi] {
			var se stdEvent
			if err := json.Unmarshal(e, &se); err != nil {
				b.Fatal(err)
			}
		}
		tCodec += t1.Sub(t0)
		tStd += time.Since(t1)
		n += hi - lo
	}
	b.ReportMetric(float64(tCodec.Nanoseconds())/float64(n), "codec-ns/event")
	b.ReportMetric(float64(tStd.Nanoseconds())/float64(n), "std-ns/event")
	b.ReportMetric(float64(tStd)/float64(tCodec), "x-vs-std")
}

// BenchmarkDecodeTextContent is the hot path: a warm Decoder on
// TEXT_MESSAGE_CONTENT must not allocate.
func BenchmarkDecodeTextContent(b *testing.B) {
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_01HZX3","delta":" the quick brown"}`)
	b.Run("impl=codec", func(b *testing.B) {
		var d Decoder
		var ev Event
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := d.Decode(data, &ev); err != nil || ev.Delta != " the quick brown" {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var ev stdEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeStateDelta is a four-operation STATE_DELTA of the reducer's
// short-thread fixture: JSON Patch decoding must not allocate either.
func BenchmarkDecodeStateDelta(b *testing.B) {
	data := []byte(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a~1b","value":false},{"op":"remove","path":"/alpha"},{"op":"move","from":"/a~1b","path":"/eta_move42"},{"op":"add","path":"/kappa","value":null}]}`)
	var d Decoder
	var ev Event
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(data, &ev); err != nil || len(ev.Patch) != 4 {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEvent encodes the decoded mix: into one reused buffer (what
// a caller with its own buffer does), into a bytebufferpool buffer, and into
// a fresh slice each time (no reuse). The pooled and reused variants make no
// allocation per event, which is what justifies pooling in callers that do
// not keep a buffer of their own.
func BenchmarkAppendEvent(b *testing.B) {
	raw := loadMix(b)
	evs := make([]*Event, len(raw))
	var d Decoder
	var size int64
	for i, r := range raw {
		var ev Event
		if err := d.Decode(r, &ev); err != nil {
			b.Fatal(err)
		}
		evs[i] = ev.Clone()
		size += int64(len(AppendEvent(nil, evs[i])))
	}
	per := size / int64(len(evs))
	b.Run("impl=reused", func(b *testing.B) {
		var buf []byte
		b.SetBytes(per)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = AppendEvent(buf[:0], evs[i%len(evs)])
		}
	})
	b.Run("impl=bytebufferpool", func(b *testing.B) {
		b.SetBytes(per)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			bb := bytebufferpool.Get()
			bb.B = AppendEvent(bb.B, evs[i%len(evs)])
			bytebufferpool.Put(bb)
		}
	})
	b.Run("impl=fresh", func(b *testing.B) {
		b.SetBytes(per)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = AppendEvent(nil, evs[i%len(evs)])
		}
	})
	b.Run("impl=encoding_json", func(b *testing.B) {
		std := make([]stdEvent, len(raw))
		for i, r := range raw {
			if err := json.Unmarshal(r, &std[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(per)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := json.Marshal(&std[i%len(std)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkUTF8Validate is the measurement behind simdUTF8Min: sonic's SIMD
// validator against unicode/utf8 on non-ASCII text of growing length.
func BenchmarkUTF8Validate(b *testing.B) {
	for _, n := range []int{8, 32, 64, 256, 4096} {
		s := []byte(strings.Repeat("é", n/2))
		b.Run("impl=std/len="+itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if !utf8.Valid(s) {
					b.Fatal()
				}
			}
		})
		b.Run("impl=sonic/len="+itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if !sonicutf8.Validate(s) {
					b.Fatal()
				}
			}
		})
	}
}

// BenchmarkSkipLargePayload compares our validating skip with sonic.Valid
// on a large open payload (an 8 KiB state snapshot).
func BenchmarkSkipLargePayload(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"type":"STATE_SNAPSHOT","snapshot":{"items":[`)
	for i := 0; sb.Len() < 8<<10; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"id":` + itoa(i) + `,"title":"item number ` + itoa(i) + `","done":false,"tags":["a","b"],"score":1.25e2}`)
	}
	sb.WriteString(`]}}`)
	data := []byte(sb.String())
	b.Run("impl=codec_decode", func(b *testing.B) {
		var d Decoder
		var ev Event
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := d.Decode(data, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=sonic_valid", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if !sonic.Valid(data) {
				b.Fatal()
			}
		}
	})
	b.Run("impl=encoding_json_valid", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(data) {
				b.Fatal()
			}
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestMixDecodesQuietly: every event of the benchmark mix is valid AG-UI
// 1.0, so it decodes without error or warning and round-trips.
func TestMixDecodesQuietly(t *testing.T) {
	var d, d2 Decoder
	var ev, ev2 Event
	for i, data := range loadMix(t) {
		if err := d.Decode(data, &ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if len(d.Warnings()) != 0 {
			t.Fatalf("event %d: %v", i, d.Warnings())
		}
		if err := d2.Decode(AppendEvent(nil, &ev), &ev2); err != nil {
			t.Fatalf("event %d re-decode: %v", i, err)
		}
		if diff := eventDiff(&ev, &ev2); diff != "" {
			t.Fatalf("event %d: %s", i, diff)
		}
	}
}

// TestDecodeTextContentAllocs pins the zero-allocation hot path.
func TestDecodeTextContentAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count is meaningful only in a normal run")
	}
	var d Decoder
	var ev Event
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi","metadata":{"k":[1,null]}}`)
	esc := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"caf\u00e9 \"x\""}`)
	d.Decode(esc, &ev) // warm the scratch
	for _, in := range [][]byte{data, esc} {
		if n := testing.AllocsPerRun(100, func() { d.Decode(in, &ev) }); n != 0 {
			t.Errorf("%s: %v allocs per Decode, want 0", in, n)
		}
	}
}
