package agent_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
)

// benchEvent is a typical streamed token: a TEXT_MESSAGE_CONTENT of a few
// characters (≈90 bytes), the bulk of real AG-UI traffic.
var benchEvent = []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-7f3a9c2e","delta":" the quick brown"}`)

const benchThreads = 64

var benchThreadIDs = func() []string {
	ids := make([]string, benchThreads)
	for i := range ids {
		ids[i] = "thread-" + strconv.Itoa(i)
	}
	return ids
}()

// publishN publishes n events round robin over benchThreads threads from one
// goroutine and waits until all are acked. It returns the elapsed time.
func publishN(b *testing.B, p *agent.Publisher, n int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	var last *agent.Future
	for i := range n {
		f, err := p.Publish(ctx, "bench", benchThreadIDs[i%benchThreads], benchEvent)
		if err != nil {
			b.Fatal(err)
		}
		last = f
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := last.Result(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkPublish measures events/s through the SDK into a file-backed
// JetStream stream, unbatched and batched, beside the baseline of raw
// JetStream async publishing of the same bytes (one event per message, no
// validation, no per-event futures).
func BenchmarkPublish(b *testing.B) {
	for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run("linger="+linger.String(), func(b *testing.B) {
			env := startJS(b, false)
			cfg := agent.DefaultConfig()
			cfg.Linger = linger
			p, err := agent.New(env.nc, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			b.SetBytes(int64(len(benchEvent)))
			b.ReportAllocs()
			b.ResetTimer()
			d := publishN(b, p, b.N)
			b.ReportMetric(float64(b.N)/d.Seconds(), "events/s")
			st := p.Stats()
			b.ReportMetric(float64(st.Acked)/float64(st.Messages), "events/msg")
		})
	}
	// Baselines: raw JetStream async publishing of the same bytes, one event
	// per message, no validation, no futures; with the library's default
	// window of 4000 outstanding acks, and with a window of 64, the most the
	// SDK has in flight here (one message per thread).
	for _, window := range []int{4000, benchThreads} {
		b.Run("baseline=raw-jetstream-async/window="+strconv.Itoa(window), func(b *testing.B) {
			env := startJS(b, false)
			js, err := jetstream.New(env.nc, jetstream.WithPublishAsyncMaxPending(window))
			if err != nil {
				b.Fatal(err)
			}
			subjects := make([]string, benchThreads)
			for i := range subjects {
				subjects[i], _ = agent.Subject("bench", benchThreadIDs[i])
			}
			b.SetBytes(int64(len(benchEvent)))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if _, err := js.PublishAsync(subjects[i%benchThreads], benchEvent, jetstream.WithStallWait(time.Minute)); err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

// BenchmarkBatchingRatio publishes the same 20,000 events with linger 0 and
// with linger 2 ms in each iteration, and reports both rates and their ratio
// (batched ÷ unbatched) from the same run.
func BenchmarkBatchingRatio(b *testing.B) {
	const n = 20000
	env := startJS(b, false)
	mk := func(linger time.Duration) *agent.Publisher {
		cfg := agent.DefaultConfig()
		cfg.Linger = linger
		p, err := agent.New(env.nc, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	unbatched, batched := mk(0), mk(2*time.Millisecond)
	defer unbatched.Close(context.Background())
	defer batched.Close(context.Background())
	b.ReportAllocs()
	var du, db time.Duration
	for b.Loop() {
		du += publishN(b, unbatched, n)
		db += publishN(b, batched, n)
	}
	iters := float64(unbatched.Stats().Acked) / n
	u := iters * n / du.Seconds()
	bt := iters * n / db.Seconds()
	b.ReportMetric(u, "unbatched-events/s")
	b.ReportMetric(bt, "batched-events/s")
	b.ReportMetric(bt/u, "ratio")
}

// BenchmarkValidate justifies the Decoder pool in ValidateEvent against a
// fresh Decoder per event.
func BenchmarkValidate(b *testing.B) {
	b.Run("pooled", func(b *testing.B) {
		b.SetBytes(int64(len(benchEvent)))
		b.ReportAllocs()
		for b.Loop() {
			if err := agent.ValidateEvent(benchEvent); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline=fresh-decoder", func(b *testing.B) {
		b.SetBytes(int64(len(benchEvent)))
		b.ReportAllocs()
		for b.Loop() {
			var d codec.Decoder
			var ev codec.Event
			if err := d.Decode(benchEvent, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
