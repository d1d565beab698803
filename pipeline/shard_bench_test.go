package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/reducer"
)

// memStore is an in-memory CheckpointStore for CPU benchmarks of the shard.
type memStore map[string][]byte

type doneFuture struct{}

func (doneFuture) Wait(context.Context) error { return nil }

func (doneFuture) Result() (bool, error) { return true, nil }

func (m memStore) Get(_ context.Context, key string) ([]byte, error) {
	if v, ok := m[key]; ok {
		return v, nil
	}
	return nil, ErrNoCheckpoint
}

func (m memStore) Put(_ context.Context, key string, v []byte, _ nats.Header) (PutFuture, error) {
	m[key] = v
	return doneFuture{}, nil
}

func (m memStore) Purge(key string) error {
	delete(m, key)
	return nil
}

type countPub struct{ n, bytes int }

func (c *countPub) PublishMsg(m *nats.Msg) error {
	c.n++
	c.bytes += len(m.Data)
	return nil
}

// BenchmarkShardApply measures the shard's CPU cost per event without NATS:
// split, decode, apply, compact, frame encode, checkpoint encode (per run
// end). Baseline: decode + reducer.Apply alone, the floor of any pipeline.
//
//	go test -run '^$' -bench ShardApply ./pipeline
func BenchmarkShardApply(b *testing.B) {
	const threads = 100
	msgs, events := benchLoad(threads*200, 32)
	_ = events
	pipeline := func(withQuota bool) func(b *testing.B) {
		return func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Tap = false
			pub := &countPub{}
			m := NewMetrics(nil)
			s := newShard(0, &cfg, discardLogger(), m, pub, memStore{})
			ps := &partState{p: 0, dirty: make(map[*hotThread]struct{})}
			s.parts[0] = ps
			hts := make([]*hotThread, benchThreads)
			for i := range hts {
				hts[i] = s.thread(context.Background(), ps, threadKey{"acme", "bench-" + strconv.Itoa(i)})
			}
			b.ReportAllocs()
			b.ResetTimer()
			n, seq := 0, uint64(0)
			for b.Loop() {
				if n > 0 && n%len(msgs) == 0 { // start over with fresh threads
					for i := range hts {
						hts[i].th = reducer.NewThread("x")
					}
					seq = 0
				}
				msg := msgs[n%len(msgs)]
				n++
				seq++
				s.now = time.Now()
				if withQuota { // what beginQuota sets for a tenant with rates never reached
					s.quota = msgQuota{lim: quota.Limits{EventsPerSec: 1e12, BytesPerSec: 1e15}, rated: true, at: s.now}
				}
				s.apply(hts[msg.thread], seq, msg.data, nil)
				if n%16 == 0 {
					s.flush(context.Background(), false)
				}
			}
			b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "events/s")
			if withQuota && (ps.win.Len() != 1 || counterValue(m.QuotaShed.WithLabelValues("acme", "events_per_sec")) != 0) {
				b.Fatal("the quota was not checked, or shed")
			}
		}
	}
	b.Run("pipeline", pipeline(false))
	b.Run("pipeline+quota", pipeline(true))
	b.Run("baseline-decode-apply", func(b *testing.B) {
		ths := make([]*reducer.Thread, benchThreads)
		for i := range ths {
			ths[i] = reducer.NewThread("x")
		}
		var dec codec.Decoder
		var ev codec.Event
		b.ReportAllocs()
		n, seq := 0, uint64(0)
		for b.Loop() {
			if n > 0 && n%len(msgs) == 0 {
				for i := range ths {
					ths[i] = reducer.NewThread("x")
				}
				seq = 0
			}
			m := msgs[n%len(msgs)]
			n++
			seq++
			for data := m.data; ; {
				e, rest, ok := history.NextEvent(data)
				if !ok {
					break
				}
				if err := dec.Decode(e, &ev); err != nil {
					b.Fatal(err)
				}
				if r := ths[m.thread].Apply(seq, &ev); r.Fatal != nil {
					b.Fatal(r.Fatal)
				}
				data = rest
			}
		}
		b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "events/s")
	})
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
