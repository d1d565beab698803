package pipeline_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/threadcast/threadcast/agent"
)

// bridgeBody is n typical streamed-token events as JSONL (≈90 bytes each).
func bridgeBody(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		b.WriteString(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-7f3a9c2e","delta":" token ` + strconv.Itoa(i) + `"}` + "\n")
	}
	return b.Bytes()
}

// BenchmarkBridge measures events/s through the HTTP bridge (one POST of
// 10,000 events per iteration, answered after every ack), beside the
// baseline of agent.PublishStream on the same bytes without HTTP.
func BenchmarkBridge(b *testing.B) {
	const n = 10000
	body := bridgeBody(n)
	b.Run("http", func(b *testing.B) {
		env := startBridgeB(b)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/ingest/bench/t", bytes.NewReader(body))
			req.Header.Set("Authorization", bridgeToken)
			resp, err := env.http.Client().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("baseline=PublishStream", func(b *testing.B) {
		env := startBridgeB(b)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			res, err := agent.PublishStream(context.Background(), env.pub, "bench", "t", bytes.NewReader(body), agent.StreamOptions{})
			if err != nil || res.Accepted != n {
				b.Fatalf("%+v, %v", res, err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	})
}
