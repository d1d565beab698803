package demo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// startJetStream starts an embedded nats-server with JetStream
// (natstest.Start) and the event stream as the pipeline configures it,
// with maxMsg as its message size limit.
func startJetStream(t *testing.T, maxMsg int32) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := natstest.Connect(t, natstest.Start(t).ClientURL())
	js := natstest.JetStream(t, nc)
	cfg := pipeline.DefaultConfig()
	sc := pipeline.StreamConfig(&cfg)
	sc.MaxMsgSize = maxMsg
	if _, err := js.CreateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// storedEvents reads the stream back: every event, per tenant/thread, in
// stream order.
func storedEvents(t *testing.T, js jetstream.JetStream) map[string][][]byte {
	t.Helper()
	s, err := js.Stream(t.Context(), wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		_, tenant, token, err := wire.ParseStoredSubject(m.Subject)
		if err != nil {
			t.Fatal(err)
		}
		thread, err := wire.DecodeThread(token)
		if err != nil {
			t.Fatal(err)
		}
		out[tenant+"/"+thread] = append(out[tenant+"/"+thread], bytes.Split(m.Data, []byte("\n"))...)
	}
	return out
}

// TestAgentPublisher plays demo agents through the real SDK into an embedded
// JetStream and reads the stream back: each thread holds exactly its
// script, in order, and the stored streams are valid.
func TestAgentPublisher(t *testing.T) {
	nc, js := startJetStream(t, 1<<20)
	pub, err := agent.New(nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg := Config{Tenants: []string{"acme", "globex"}, Agents: 2, Rate: 4000, RunsPerThread: 2, ThreadsPerAgent: 1, Seed: 11}
	stats, err := Run(ctx, AgentPublisher(pub), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if stats.Errors != 0 {
		t.Fatalf("stats %+v", stats)
	}
	stored := storedEvents(t, js)
	if len(stored) != 2 {
		t.Fatalf("stored threads %v", len(stored))
	}
	var total uint64
	for i, tenant := range cfg.Tenants {
		persona := Personas()[i]
		// Thread ids are the runner's; find this agent's.
		var key string
		for k := range stored {
			if strings.HasPrefix(k, tenant+"/"+persona+"-") {
				key = k
			}
		}
		if key == "" {
			t.Fatalf("no thread of tenant %s in %v", tenant, stored)
		}
		s := NewScript(mix(11, uint64(i)<<32), Options{Persona: persona, ThreadID: key[len(tenant)+1:]})
		want := append(s.NextRun(), s.NextRun()...)
		got := stored[key]
		if len(got) != len(want) {
			t.Fatalf("%s: %d events stored, script has %d", key, len(got), len(want))
		}
		stream := make([]Event, len(got))
		for j := range got {
			body, _ := unstamp(t, got[j])
			if !bytes.Equal(body, want[j].JSON) {
				t.Fatalf("%s event %d: stored %s, script %s", key, j, body, want[j].JSON)
			}
			stream[j] = Event{JSON: got[j]}
		}
		reduce(t, key, stream)
		total += uint64(len(got))
	}
	if total != stats.Events {
		t.Errorf("stored %d events, stats say %d", total, stats.Events)
	}
}

// TestAgentPublisherReportsFailures makes the stream refuse large messages:
// the SDK fails them after accepting them, and the adapter reports that on
// the thread's next Publish, which makes the agent abandon the thread.
func TestAgentPublisherReportsFailures(t *testing.T) {
	nc, _ := startJetStream(t, 1024)
	acfg := agent.DefaultConfig()
	acfg.Linger = 20 * time.Millisecond // batches grow past the stream's limit
	pub, err := agent.New(nc, acfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var errs []error
	cfg := Config{Tenants: []string{"acme"}, Agents: 1, Rate: 2000, RunsPerThread: 1, ThreadsPerAgent: 4, Seed: 2,
		OnError: func(_, _ string, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }}
	stats, err := Run(ctx, AgentPublisher(pub), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = pub.Close(ctx) // the failed messages' futures report errors; nothing else to check
	if stats.Errors == 0 || len(errs) != int(stats.Errors) {
		t.Fatalf("stats %+v, %d errors reported", stats, len(errs))
	}
	for _, err := range errs {
		if !errors.Is(err, agent.ErrPublish) {
			t.Errorf("reported %v, want agent.ErrPublish", err)
		}
	}
}
