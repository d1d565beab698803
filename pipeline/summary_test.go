package pipeline

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// chanSink hands run summaries to a test without blocking the shard (a
// full channel drops: the tests size it).
type chanSink chan RunSummary

func (c chanSink) Run(s *RunSummary) {
	select {
	case c <- *s:
	default:
	}
}

func nextRun(t *testing.T, c chanSink) RunSummary {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no run summary")
		return RunSummary{}
	}
}

// TestRunSinkSpans: Config.Runs receives each run's summary with its tool
// calls and subagent invocations timed from the events, also when every
// thread is evicted and reloaded from its checkpoint after each batch
// (the open run's spans travel in the checkpoint).
func TestRunSinkSpans(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.MemoryBudget = 1
	cfg.CheckpointEvery = 1
	sink := make(chanSink, 8)
	cfg.Runs = sink
	startIngest(t, nc, cfg)
	ev := func(s string) json.RawMessage { return json.RawMessage(s) }
	events := []json.RawMessage{
		ev(`{"type":"RUN_STARTED","threadId":"s1","runId":"r1","parentRunId":"r0","timestamp":1000}`),
		ev(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant","timestamp":1001}`),
		ev(`{"type":"TEXT_MESSAGE_END","messageId":"m1","timestamp":1002}`),
		ev(`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search","parentMessageId":"m1","timestamp":1100}`),
		ev(`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}","timestamp":1150}`),
		ev(`{"type":"TOOL_CALL_END","toolCallId":"c1","timestamp":1200}`),
		ev(`{"type":"TOOL_CALL_RESULT","messageId":"t1","toolCallId":"c1","content":"ok","timestamp":1700}`),
		ev(`{"type":"SUBAGENT_STARTED","subagentRunId":"sa1","name":"researcher","parentToolCallId":"c1","timestamp":1800}`),
		ev(`{"type":"TOOL_CALL_CHUNK","toolCallId":"c2","toolCallName":"fetch","subagentRunId":"sa1","delta":"{","timestamp":1900}`),
		ev(`{"type":"TOOL_CALL_CHUNK","delta":"}","subagentRunId":"sa1","timestamp":1950}`),
		ev(`{"type":"SUBAGENT_FINISHED","subagentRunId":"sa1","timestamp":2500}`),
		ev(`{"type":"SUBAGENT_STARTED","subagentRunId":"sa2","name":"writer","timestamp":2600}`),
		ev(`{"type":"SUBAGENT_ERROR","subagentRunId":"sa2","message":"boom","code":"E1","timestamp":2700}`),
		ev(`{"type":"RUN_FINISHED","threadId":"s1","runId":"r1","timestamp":3000,"usage":[{"provider":"openai","model":"gpt","inputTokens":10,"outputTokens":5}]}`),
		ev(`{"type":"RUN_STARTED","threadId":"s1","runId":"r2","timestamp":4000}`),
		ev(`{"type":"SUBAGENT_STARTED","subagentRunId":"sa3","name":"critic","timestamp":4100}`),
		ev(`{"type":"TOOL_CALL_START","toolCallId":"c3","toolCallName":"open","timestamp":4200}`),
		ev(`{"type":"RUN_ERROR","message":"provider down","code":"503","timestamp":4500}`),
	}
	publishStreams(t, js, []stream{{tenant: "acme", thread: "s1", events: events}}, 1)

	r1 := nextRun(t, sink)
	if r1.Tenant != "acme" || r1.Thread != "s1" || r1.RunID != "r1" || r1.ParentRunID != "r0" || r1.Outcome != "success" {
		t.Errorf("run 1 %+v", r1)
	}
	wantTools := []ToolCallSpan{
		{ID: "c1", Name: "search", ParentMessageID: "m1", StartedAt: 1100, EndedAt: 1700, Result: true},
		{ID: "c2", Name: "fetch", SubagentRunID: "sa1", StartedAt: 1900, EndedAt: 1950},
	}
	if fmt.Sprint(r1.ToolCallSpans) != fmt.Sprint(wantTools) {
		t.Errorf("run 1 tool calls %+v, want %+v", r1.ToolCallSpans, wantTools)
	}
	wantSub := []SubagentSpan{
		{RunID: "sa1", Name: "researcher", ParentToolCallID: "c1", StartedAt: 1800, EndedAt: 2500, Outcome: "success"},
		{RunID: "sa2", Name: "writer", StartedAt: 2600, EndedAt: 2700, Outcome: "error", Error: "boom", Code: "E1"},
	}
	if fmt.Sprint(r1.SubagentSpans) != fmt.Sprint(wantSub) {
		t.Errorf("run 1 subagents %+v, want %+v", r1.SubagentSpans, wantSub)
	}
	r2 := nextRun(t, sink)
	if r2.RunID != "r2" || r2.Outcome != "error" || r2.Error != "provider down" || r2.ParentRunID != "" ||
		len(r2.SubagentSpans) != 1 || r2.SubagentSpans[0].Outcome != "abandoned" || r2.SubagentSpans[0].EndedAt != 4500 ||
		len(r2.ToolCallSpans) != 1 || r2.ToolCallSpans[0].EndedAt != 4500 {
		t.Errorf("run 2 %+v", r2)
	}
}

// TestRunSpansBounded: a run keeps at most MaxRunSpans spans, counting the
// rest, and cuts long ids.
func TestRunSpansBounded(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	sink := make(chanSink, 1)
	cfg.Runs = sink
	startIngest(t, nc, cfg)
	long := fmt.Sprintf("%0300d", 7)
	events := []json.RawMessage{json.RawMessage(`{"type":"RUN_STARTED","threadId":"s1","runId":"r1"}`)}
	const calls = MaxRunSpans + 20
	for i := range calls {
		id := fmt.Sprintf("c%d", i)
		if i == 0 {
			id = long
		}
		events = append(events,
			json.RawMessage(fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":%q,"toolCallName":"f"}`, id)),
			json.RawMessage(fmt.Sprintf(`{"type":"TOOL_CALL_END","toolCallId":%q}`, id)))
	}
	events = append(events, json.RawMessage(`{"type":"RUN_FINISHED","threadId":"s1","runId":"r1"}`))
	publishStreams(t, js, []stream{{tenant: "acme", thread: "s1", events: events}}, 1)
	r := nextRun(t, sink)
	if r.ToolCalls != calls || len(r.ToolCallSpans) != MaxRunSpans || r.DroppedSpans != calls-MaxRunSpans {
		t.Errorf("tool calls %d, spans %d, dropped %d", r.ToolCalls, len(r.ToolCallSpans), r.DroppedSpans)
	}
	if id := r.ToolCallSpans[0].ID; len(id) != MaxSpanString || r.ToolCallSpans[0].EndedAt < r.ToolCallSpans[0].StartedAt {
		t.Errorf("first span %+v", r.ToolCallSpans[0])
	}
}
