package agent_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/pipeline"
)

// TestServerRestartMidStream restarts the NATS server (same port, same
// store) while four threads publish. In-flight messages lose their acks and
// are retried with their Nats-Msg-Id after the client reconnects; every event
// must end up stored exactly once and in order.
func TestServerRestartMidStream(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.ClientURL(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	pcfg := pipeline.DefaultConfig()
	if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&pcfg)); err != nil {
		t.Fatal(err)
	}
	cfg := withLinger(time.Millisecond)
	cfg.AckTimeout, cfg.MaxRetries, cfg.RetryWait = time.Second, 100, 20*time.Millisecond
	p, err := agent.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}

	const threads, perThread = 4, 400
	var wg sync.WaitGroup
	futs := make([][]*agent.Future, threads)
	half := make(chan struct{}, threads)
	for th := range threads {
		wg.Go(func() {
			for i := range perThread {
				if i == perThread/2 {
					half <- struct{}{}
				}
				f, err := p.Publish(ctx, "acme", "t"+strconv.Itoa(th), contentEvent("m", i))
				if err != nil {
					t.Errorf("thread %d event %d: %v", th, i, err)
					return
				}
				futs[th] = append(futs[th], f)
			}
		})
	}
	for range threads {
		<-half
	}
	// Restart on the same port, with the same store.
	srv.Restart()
	wg.Wait()

	for th := range threads {
		for i, f := range futs[th] {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatalf("thread %d event %d: %v", th, i, err)
			}
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	next := make(map[string]int)
	for _, m := range readStream(t, js) {
		for _, ev := range m.events {
			if want := string(contentEvent("m", next[m.thread])); string(ev) != want {
				t.Fatalf("thread %s: stored %s, want %s", m.thread, ev, want)
			}
			next[m.thread]++
		}
	}
	for th := range threads {
		if n := next["t"+strconv.Itoa(th)]; n != perThread {
			t.Errorf("thread %d: %d events stored, want %d", th, n, perThread)
		}
	}
	t.Logf("stats after restart: %+v", p.Stats())
}
