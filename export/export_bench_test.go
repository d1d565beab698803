package export

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/wire"
)

// publishSynthetic publishes threads threads of runs runs each (a text
// message of 40 deltas, a tool call with 5 argument deltas and its result,
// usage on RUN_FINISHED: 52 events), in JSONL batches of 13 events as the
// SDK batches them, and returns the number of events.
func publishSynthetic(tb testing.TB, js jetstream.JetStream, tenant string, threads, runs int) int {
	tb.Helper()
	n := 0
	for th := range threads {
		id := fmt.Sprintf("bench-%d", th)
		subj, err := wire.EventSubject(tenant, id)
		if err != nil {
			tb.Fatal(err)
		}
		var evs []string
		for r := range runs {
			evs = append(evs, fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":"r%d"}`, id, r),
				fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":"m%d","role":"assistant"}`, r))
			for d := range 40 {
				evs = append(evs, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%d","delta":"word %d of the answer "}`, r, d))
			}
			evs = append(evs, fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":"m%d"}`, r),
				fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":"c%d","toolCallName":"search","parentMessageId":"m%d"}`, r, r))
			for d := range 5 {
				evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_ARGS","toolCallId":"c%d","delta":"{\"k%d\":1}"}`, r, d))
			}
			evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_END","toolCallId":"c%d"}`, r),
				fmt.Sprintf(`{"type":"TOOL_CALL_RESULT","messageId":"t%d","toolCallId":"c%d","content":"found it"}`, r, r),
				fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":"r%d","usage":[{"model":"m","inputTokens":100,"outputTokens":40}]}`, id, r))
		}
		n += len(evs)
		for i := 0; i < len(evs); i += 13 {
			if _, err := js.PublishAsync(subj, []byte(strings.Join(evs[i:min(i+13, len(evs))], "\n"))); err != nil {
				tb.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatal("publish acks: timed out")
	}
	return n
}

// BenchmarkExport exports 100 threads of 10 runs (52,000 events, 1,000
// runs, 2,000 messages, 1,000 tool calls) from an embedded server.
func BenchmarkExport(b *testing.B) {
	_, js := bus(b)
	events := publishSynthetic(b, js, "acme", 100, 10)
	for _, f := range []Format{FormatParquet, FormatNDJSON} {
		b.Run(string(f), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := Run(context.Background(), js, Config{Tenant: "acme", Format: f, Out: b.TempDir()})
				if err != nil || res.Threads != 100 || res.Manifest.Parts[0].Runs != 1000 {
					b.Fatalf("%+v, %v", res, err)
				}
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
