package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is an in-memory Publisher: it keeps every event per thread with
// the (bubble) time it was published.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	threads map[string][]published
	order   []string // threads in order of first event
	tenants map[string]string
	fail    func(thread string, n int) error // optional: fail the n-th event of thread
}

type published struct {
	at   time.Duration
	json []byte
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), threads: map[string][]published{}, tenants: map[string]string{}}
}

func (r *recorder) Publish(ctx context.Context, tenant, thread string, ev []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(thread, len(r.threads[thread])); err != nil {
			return err
		}
	}
	if _, ok := r.threads[thread]; !ok {
		r.order = append(r.order, thread)
		r.tenants[thread] = tenant
	}
	r.threads[thread] = append(r.threads[thread], published{time.Since(r.start), bytes.Clone(ev)})
	return nil
}

func (r *recorder) total(before time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, evs := range r.threads {
		for _, e := range evs {
			if e.at <= before {
				n++
			}
		}
	}
	return n
}

// unstamp removes the `timestamp` member the runner adds, returning the
// script's own bytes and the stamp.
func unstamp(t *testing.T, ev []byte) ([]byte, int64) {
	t.Helper()
	const pre = `{"timestamp":`
	if !bytes.HasPrefix(ev, []byte(pre)) {
		t.Fatalf("event not stamped: %s", ev)
	}
	rest := ev[len(pre):]
	comma := bytes.IndexByte(rest, ',')
	ms, err := strconv.ParseInt(string(rest[:comma]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{'{'}, rest[comma+1:]...), ms
}

// TestRunRate checks rate control in a synctest bubble: the fake clock makes
// the count exact up to each agent's boundary event.
func TestRunRate(t *testing.T) {
	tests := []struct {
		name       string
		giveRate   float64
		giveAgents int
		giveFor    time.Duration
	}{
		{"200/s over 4 agents", 200, 4, 10 * time.Second},
		{"1000/s over 6 agents", 1000, 6, 5 * time.Second},
		{"3/s over 3 agents", 3, 3, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				ctx, cancel := context.WithCancel(t.Context())
				var stats Stats
				done := make(chan struct{})
				go func() {
					defer close(done)
					stats, _ = Run(ctx, rec, Config{Rate: tt.giveRate, Agents: tt.giveAgents, Seed: 1})
				}()
				time.Sleep(tt.giveFor)
				synctest.Wait()
				got := rec.total(tt.giveFor)
				cancel()
				<-done
				want := int(tt.giveRate * tt.giveFor.Seconds())
				if got < want-tt.giveAgents || got > want+tt.giveAgents {
					t.Errorf("%d events in %v, want %d ± %d", got, tt.giveFor, want, tt.giveAgents)
				}
				// Stats also count each agent's closing RUN_ERROR, published
				// after the cancel.
				if int(stats.Events) < got || int(stats.Events) > got+2*tt.giveAgents {
					t.Errorf("Stats.Events = %d, recorder saw %d before the stop", stats.Events, got)
				}
			})
		})
	}
}

// TestRunFollowsHints checks the timing-hint mode: each event is published
// exactly the scaled sum of the pauses before it, and carries the script's
// bytes stamped with the publishing time.
func TestRunFollowsHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := Config{Tenants: []string{"solo"}, Agents: 1, TimeScale: 0.5, RunsPerThread: 3, ThreadsPerAgent: 1, Seed: 99}
		stats, err := Run(t.Context(), rec, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.order) != 1 {
			t.Fatalf("threads %v", rec.order)
		}
		thread := rec.order[0]
		s := NewScript(mix(99, 0), Options{Persona: "travel", ThreadID: thread})
		var want []Event
		for range 3 {
			want = append(want, s.NextRun()...)
		}
		got := rec.threads[thread]
		if len(got) != len(want) || stats.Events != uint64(len(want)) || stats.Runs != 3 || stats.Threads != 1 {
			t.Fatalf("published %d events (stats %+v), script has %d", len(got), stats, len(want))
		}
		var at time.Duration
		for i := range want {
			at += want[i].Pause / 2
			body, ms := unstamp(t, got[i].json)
			if !bytes.Equal(body, want[i].JSON) {
				t.Fatalf("event %d: published %s, script %s", i, body, want[i].JSON)
			}
			if got[i].at != at {
				t.Fatalf("event %d published at %v, want %v", i, got[i].at, at)
			}
			if ms != rec.start.Add(at).UnixMilli() {
				t.Fatalf("event %d stamped %d, want %d", i, ms, rec.start.Add(at).UnixMilli())
			}
		}
	})
}

// TestRunThreads checks the finite mode: agents spread over tenants, thread
// ids unique, each thread the script of its seed, and Run returning by
// itself.
func TestRunThreads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		cfg := Config{Tenants: []string{"a", "b"}, Agents: 4, Rate: 5000, RunsPerThread: 2, ThreadsPerAgent: 3, Seed: 5, NoTimestamps: true}
		stats, err := Run(t.Context(), rec, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Threads != 12 || stats.Runs != 24 || stats.Errors != 0 {
			t.Fatalf("stats %+v", stats)
		}
		if len(rec.threads) != 12 {
			t.Fatalf("%d distinct threads, want 12", len(rec.threads))
		}
		perTenant := map[string]int{}
		var events uint64
		for thread, evs := range rec.threads {
			perTenant[rec.tenants[thread]]++
			events += uint64(len(evs))
			starts := 0
			for _, e := range evs {
				if bytes.HasPrefix(e.json, []byte(`{"timestamp"`)) {
					t.Fatalf("NoTimestamps, but %s", e.json)
				}
				if bytes.HasPrefix(e.json, []byte(`{"type":"RUN_STARTED"`)) {
					starts++
				}
			}
			if starts != 2 {
				t.Errorf("thread %s has %d runs, want 2", thread, starts)
			}
		}
		if perTenant["a"] != 6 || perTenant["b"] != 6 {
			t.Errorf("threads per tenant %v, want 6 each", perTenant)
		}
		if events != stats.Events {
			t.Errorf("recorded %d events, stats say %d", events, stats.Events)
		}
	})
}

// TestRunStopClosesRuns checks that stopping leaves no run open: each
// thread's last event is a terminal one, and the runner's own RUN_ERROR
// follows an interrupted run.
func TestRunStopClosesRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second)
		defer cancel()
		if _, err := Run(ctx, rec, Config{Rate: 120, Seed: 3}); err != nil {
			t.Fatal(err)
		}
		stopped := 0
		for thread, evs := range rec.threads {
			var last struct{ Type, Code string }
			if err := json.Unmarshal(evs[len(evs)-1].json, &last); err != nil {
				t.Fatal(err)
			}
			if last.Type != RunFinished && last.Type != RunError {
				t.Errorf("thread %s ends with %s: run left open", thread, last.Type)
			}
			if last.Code == "agent_stopped" {
				stopped++
			}
			// The stamped stream, the runner's closing event included, is
			// valid as a whole.
			stream := make([]Event, len(evs))
			for i, e := range evs {
				stream[i] = Event{JSON: e.json}
			}
			reduce(t, thread, stream)
		}
		if stopped == 0 {
			t.Error("no thread was closed by the stop, though agents were mid-run")
		}
	})
}

// TestRunPublishError checks that a failed publish abandons the thread,
// reports the error, and the agent carries on with a fresh thread.
func TestRunPublishError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		boom := errors.New("boom")
		var failedThread string
		rec.fail = func(thread string, n int) error {
			if failedThread == "" && n == 30 {
				failedThread = thread
				return boom
			}
			return nil
		}
		var reported []error
		cfg := Config{Tenants: []string{"x"}, Agents: 1, Rate: 1000, RunsPerThread: 2, ThreadsPerAgent: 3, Seed: 8,
			OnError: func(tenant, thread string, err error) {
				if tenant != "x" || thread != failedThread {
					t.Errorf("OnError(%q, %q)", tenant, thread)
				}
				reported = append(reported, err)
			}}
		stats, err := Run(t.Context(), rec, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(reported) != 1 || !errors.Is(reported[0], boom) || stats.Errors != 1 {
			t.Fatalf("reported %v, stats %+v", reported, stats)
		}
		if n := len(rec.threads[failedThread]); n != 30 {
			t.Errorf("failed thread has %d events, want the 30 before the failure", n)
		}
		if stats.Threads != 3 || len(rec.threads) != 3 {
			t.Errorf("stats %+v, %d threads: the agent should have moved on", stats, len(rec.threads))
		}
	})
}

func TestRunConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		give Config
	}{
		{"negative agents", Config{Agents: -1}},
		{"negative rate", Config{Rate: -5}},
		{"negative time scale", Config{TimeScale: -1}},
		{"negative runs", Config{RunsPerThread: -2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(t.Context(), PublisherFunc(func(context.Context, string, string, []byte) error {
				t.Error("published with an invalid config")
				return nil
			}), tt.give)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}
