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

// A run's summary is the same whether its thread stays in memory or is
// evicted and reloaded from its checkpoint between any two events: the
// open chunk streams (a chunk without an id continues the last one) travel
// in the checkpoint too.
func TestRunAccCheckpointBetweenEvents(t *testing.T) {
	body := []byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r1","timestamp":1000}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"a","timestamp":1001}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"b","timestamp":1002}
{"type":"TEXT_MESSAGE_CHUNK","delta":"c","timestamp":1003}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"fetch","delta":"{","timestamp":1900}
{"type":"TOOL_CALL_CHUNK","delta":"\"q\":1","timestamp":1950}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","delta":"}","timestamp":1960}
{"type":"RUN_FINISHED","threadId":"t","runId":"r1","timestamp":3000}`)
	now := time.UnixMilli(9000)
	var (
		dec       codec.Decoder
		ev        codec.Event
		kept      runAcc
		reloaded  runAcc
		keptSum   RunSummary
		reloadSum RunSummary
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
		if kept.observe(seq, &ev, now) {
			keptSum = kept.s
		}
		var next runAcc
		next.unmarshal(reloaded.marshal())
		reloaded = next
		if reloaded.observe(seq, &ev, now) {
			reloadSum = reloaded.s
		}
	}
	want := []ToolCallSpan{{ID: "c1", Name: "fetch", StartedAt: 1900, EndedAt: 1960}}
	if keptSum.Messages != 1 || keptSum.ToolCalls != 1 || fmt.Sprint(keptSum.ToolCallSpans) != fmt.Sprint(want) {
		t.Errorf("in memory: messages %d, tool calls %d, spans %+v; want 1, 1, %+v",
			keptSum.Messages, keptSum.ToolCalls, keptSum.ToolCallSpans, want)
	}
	if fmt.Sprintf("%+v", reloadSum) != fmt.Sprintf("%+v", keptSum) {
		t.Errorf("reloaded between events:\n%+v\nin memory:\n%+v", reloadSum, keptSum)
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
