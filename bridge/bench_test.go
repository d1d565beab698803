package bridge_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/quota"
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
	post := func(withQuota bool) func(b *testing.B) {
		return func(b *testing.B) {
			env := startBridgeTB(b, func(c *bridge.Config) {
				if withQuota { // every quota of the bridge checked, none reached
					qc := quota.DefaultConfig()
					qc.Default = quota.Limits{EventsPerSec: 1e12, BytesPerSec: 1e15, BodyBytesInFlight: 1 << 40}
					q, err := quota.New(qc)
					if err != nil {
						b.Fatal(err)
					}
					c.Quota = q
				}
			})
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
		}
	}
	b.Run("http", post(false))
	b.Run("http+quota", post(true))
	b.Run("http+window=unbounded", func(b *testing.B) {
		env := startBridgeTB(b, func(c *bridge.Config) { c.Window = -1 })
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
	// An Idempotency-Key makes each event a message of its own (one in
	// flight per thread): the price of storing a retry's events once.
	b.Run("http+idempotency-key", func(b *testing.B) {
		nd := startIdemNode(b, b.TempDir())
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			req, _ := http.NewRequest(http.MethodPost, nd.http.URL+"/v1/ingest/bench/t", bytes.NewReader(body))
			req.Header.Set("Authorization", bridgeToken)
			req.Header.Set(bridge.HeaderIdempotencyKey, strconv.Quote("bench-"+strconv.Itoa(i)))
			resp, err := nd.http.Client().Do(req)
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
