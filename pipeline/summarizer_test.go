package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
)

// RunSummarizer sums runs as the shard does: a run ends with its terminal
// event or a rejection, and events outside a run count for nothing.
func TestRunSummarizer(t *testing.T) {
	body := []byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r1","timestamp":1000}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"hi"}
{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f"}
{"type":"RUN_FINISHED","threadId":"t","runId":"r1","timestamp":1500,"usage":[{"model":"x","inputTokens":7}]}
{"type":"CUSTOM","name":"between","value":1}
{"type":"RUN_STARTED","threadId":"t","runId":"r2"}`)
	now := time.UnixMilli(9000)
	var (
		r    RunSummarizer
		dec  codec.Decoder
		ev   codec.Event
		sums []RunSummary
	)
	seq := uint64(0)
	for {
		line, rest, ok := history.NextEvent(body)
		if !ok {
			break
		}
		seq++
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if s, ok := r.Observe(seq, &ev, now); ok {
			sums = append(sums, s)
		}
		body = rest
	}
	if seq != 6 || len(sums) != 1 || !r.Open() {
		t.Fatalf("%d events, %d summaries, open %v", seq, len(sums), r.Open())
	}
	s := sums[0]
	if s.RunID != "r1" || s.StartSeq != 1 || s.EndSeq != 4 || s.Events != 4 || s.Messages != 1 || s.ToolCalls != 1 ||
		s.Outcome != "success" || s.DurationMs != 500 || s.InputTokens != 7 || len(s.Usage) != 1 || s.Usage[0].OutputTokens != nil {
		t.Errorf("summary %+v", s)
	}
	s, ok := r.Reject(7, "bad event", now)
	if !ok || s.RunID != "r2" || s.Outcome != "rejected" || s.Error != "bad event" || s.StartedAt != 9000 || s.EndSeq != 7 || r.Open() {
		t.Errorf("rejected %+v, ok %v, open %v", s, ok, r.Open())
	}
	if _, ok := r.Reject(8, "again", now); ok {
		t.Error("a rejection with no run open ended one")
	}
}

// summarizeTwice sums body's run in memory (kept) and, in parallel, with
// the accumulator written to its checkpoint form and read back between
// every two events (reloaded).
func summarizeTwice(t *testing.T, body []byte) (kept, reloaded RunSummary) {
	t.Helper()
	now := time.UnixMilli(9000)
	var (
		dec      codec.Decoder
		ev       codec.Event
		acc, rel runAcc
	)
	for seq := uint64(1); ; seq++ {
		line, rest, ok := history.NextEvent(body)
		if !ok {
			break
		}
		body = rest
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if acc.observe(seq, &ev, now) {
			kept = acc.s
		}
		var next runAcc
		next.unmarshal(rel.marshal())
		rel = next
		if rel.observe(seq, &ev, now) {
			reloaded = rel.s
		}
	}
	return kept, reloaded
}

// A run's summary is the same whether its thread stays in memory or is
// evicted and reloaded from its checkpoint between any two events: the
// open chunk streams (a chunk without an id continues the last one)
// travel in the checkpoint too, and ids read back as they were kept (cut
// on a character boundary, and valid UTF-8 even when the event's escape
// was a lone surrogate).
func TestRunAccCheckpointBetweenEvents(t *testing.T) {
	long := strings.Repeat("a", MaxSpanString-1) + "é" // a cut at MaxSpanString bytes would split é
	for _, tt := range []struct {
		name, events string
		want         []ToolCallSpan
		messages     int
	}{
		{name: "chunk streams", events: `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"a","timestamp":1001}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"b","timestamp":1002}
{"type":"TEXT_MESSAGE_CHUNK","delta":"c","timestamp":1003}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"fetch","delta":"{","timestamp":1900}
{"type":"TOOL_CALL_CHUNK","delta":"\"q\":1","timestamp":1950}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","delta":"}","timestamp":1960}`,
			want: []ToolCallSpan{{ID: "c1", Name: "fetch", StartedAt: 1900, EndedAt: 1960}}, messages: 1},
		{name: "long multibyte id", events: `{"type":"TOOL_CALL_START","toolCallId":"` + long + `","toolCallName":"f","timestamp":1100}
{"type":"TOOL_CALL_END","toolCallId":"` + long + `","timestamp":1200}`,
			want: []ToolCallSpan{{ID: long[:MaxSpanString-1], Name: "f", StartedAt: 1100, EndedAt: 1200}}},
		{name: "lone surrogates", events: `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m\ud800","role":"assistant","delta":"a","timestamp":1001}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m\ud800","delta":"b","timestamp":1002}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c\ud800","toolCallName":"fetch","delta":"{","timestamp":1900}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c\ud800","delta":"}","timestamp":1960}`,
			want: []ToolCallSpan{{ID: "c\uFFFD", Name: "fetch", StartedAt: 1900, EndedAt: 1960}}, messages: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kept, reloaded := summarizeTwice(t, []byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r1","timestamp":1000}
`+tt.events+`
{"type":"RUN_FINISHED","threadId":"t","runId":"r1","timestamp":3000}`))
			if kept.Messages != tt.messages || kept.ToolCalls != len(tt.want) || fmt.Sprint(kept.ToolCallSpans) != fmt.Sprint(tt.want) {
				t.Errorf("in memory: messages %d, tool calls %d, spans %+v; want %d, %d, %+v",
					kept.Messages, kept.ToolCalls, kept.ToolCallSpans, tt.messages, len(tt.want), tt.want)
			}
			if fmt.Sprintf("%+v", reloaded) != fmt.Sprintf("%+v", kept) {
				t.Errorf("reloaded between events:\n%+v\nin memory:\n%+v", reloaded, kept)
			}
		})
	}
}

// The strings a producer writes into a summary are cut: RUN_ERROR's
// message at MaxRunError bytes, its code and the usage's provider and
// model at MaxSpanString.
func TestRunSummaryBoundsProducerStrings(t *testing.T) {
	long := strings.Repeat("x", 5000)
	body := []byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r1"}
{"type":"RUN_FINISHED","threadId":"t","runId":"r1","usage":[{"provider":"` + long + `","model":"` + long + `","inputTokens":1}]}
{"type":"RUN_STARTED","threadId":"t","runId":"r2"}
{"type":"RUN_ERROR","message":"` + long + `","code":"` + long + `"}`)
	var (
		r    RunSummarizer
		dec  codec.Decoder
		ev   codec.Event
		sums []RunSummary
	)
	for seq := uint64(1); ; seq++ {
		line, rest, ok := history.NextEvent(body)
		if !ok {
			break
		}
		body = rest
		if err := dec.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if s, ok := r.Observe(seq, &ev, time.UnixMilli(1)); ok {
			sums = append(sums, s)
		}
	}
	if len(sums) != 2 {
		t.Fatalf("%d summaries, want 2", len(sums))
	}
	ok, bad := sums[0], sums[1]
	if len(ok.Usage) != 1 || len(ok.Usage[0].Provider) != MaxSpanString || len(ok.Usage[0].Model) != MaxSpanString {
		t.Errorf("finished run: usage %+v", ok.Usage)
	}
	if bad.Outcome != "error" || len(bad.Error) != MaxRunError || len(bad.Code) != MaxSpanString {
		t.Errorf("failed run: outcome %q, error %d bytes, code %d bytes", bad.Outcome, len(bad.Error), len(bad.Code))
	}
}
