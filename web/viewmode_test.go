package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// step is one line of testdata/replay.mjs's input.
type step struct {
	Payload json.RawMessage `json:"payload,omitempty"`
	Page    json.RawMessage `json:"page,omitempty"`
	Want    json.RawMessage `json:"want,omitempty"`
	Resync  bool            `json:"resync,omitempty"`
	Pick    []string        `json:"pick,omitempty"`
}

// replay runs testdata/replay.mjs — the dashboard's own applier,
// static/viewdoc.js, under node — on steps and returns how many passed and
// what failed.
func replay(t *testing.T, steps []step) (ok int, errs []string) {
	t.Helper()
	node := testsupport.Node(t)
	var in bytes.Buffer
	for _, s := range steps {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(node, "testdata/replay.mjs")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("replay.mjs: %v", err)
	}
	var res struct {
		OK     int      `json:"ok"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return res.OK, res.Errors
}

// TestViewModeEndToEnd is the contract test of the view mode: demo agents
// publish a thread through the SDK, ingest reduces it, the fanout streams it
// in view mode over SSE, and the dashboard's applier, fed exactly that
// stream, ends holding the view the REST API reports.
func TestViewModeEndToEnd(t *testing.T) { viewModeEndToEnd(t, 0) }

// TestViewModeWindowedEndToEnd is the same with a window of 3 messages:
// the stream holds the newest messages and its restatements are windowed;
// the applier then puts every older page in front (GET .../messages, pages
// of 4) and ends holding the REST view's messages, state and status.
func TestViewModeWindowedEndToEnd(t *testing.T) { viewModeEndToEnd(t, 3) }

func viewModeEndToEnd(t *testing.T, window int) {
	testsupport.Node(t)
	tc := startThreadcast(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list := tc.sse(t, ctx, "acme", "/v1/threads?live=1")
	stop, done := tc.playDemo(t, demo.Config{Tenants: []string{"acme"}, Agents: 1, Rate: 500, RunsPerThread: 3, ThreadsPerAgent: 1, Seed: 21,
		Options: demo.Options{ErrorRate: 0.3}})
	var info struct{ Thread string }
	select {
	case d := <-list:
		if err := json.Unmarshal([]byte(d), &info); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("no thread appeared in the live list")
	}
	// Join while the thread streams: the stream starts with a view and
	// continues with change documents.
	path := threadPath(info.Thread) + "/events?mode=view"
	if window > 0 {
		// Join once the thread holds more than a few windows, so that
		// older pages are needed.
		testsupport.WaitFor(t, 30*time.Second, "a dozen messages", func() bool {
			var v struct {
				View struct{ Messages []json.RawMessage }
			}
			return tc.get(t, "acme", threadPath(info.Thread), &v) == 200 && len(v.View.Messages) >= 12
		})
		path += "&window=" + strconv.Itoa(window)
	}
	stream := tc.sse(t, ctx, "acme", path)
	var mu sync.Mutex
	var payloads []json.RawMessage
	var lastSeq uint64
	go func() {
		for d := range stream {
			var p struct{ Seq uint64 }
			_ = json.Unmarshal([]byte(d), &p)
			mu.Lock()
			payloads = append(payloads, json.RawMessage(d))
			lastSeq = p.Seq
			mu.Unlock()
		}
	}()
	<-done
	stats := stop()
	if stats.Errors != 0 || stats.Threads != 1 {
		t.Fatalf("demo stats %+v", stats)
	}
	var rest struct {
		Seq    uint64
		Status string
		View   json.RawMessage
	}
	testsupport.WaitFor(t, 20*time.Second, "the thread to be fully applied", func() bool {
		var v struct {
			Seq    uint64
			Status string
			View   json.RawMessage
		}
		if tc.get(t, "acme", threadPath(info.Thread), &v) != 200 || v.Status == "running" {
			return false
		}
		rest.Seq, rest.Status, rest.View = v.Seq, v.Status, v.View
		mu.Lock()
		defer mu.Unlock()
		return lastSeq == v.Seq
	})
	var view struct {
		Warnings int
		Error    any
		Runs     []struct{ Status string }
		Messages []json.RawMessage
	}
	if err := json.Unmarshal(rest.View, &view); err != nil {
		t.Fatal(err)
	}
	if view.Warnings != 0 || view.Error != nil || len(view.Runs) != 3 || len(view.Messages) < 10 {
		t.Fatalf("thread view: %d warnings, error %v, %d runs, %d messages", view.Warnings, view.Error, len(view.Runs), len(view.Messages))
	}
	mu.Lock()
	steps := make([]step, len(payloads))
	for i, p := range payloads {
		steps[i] = step{Payload: p}
	}
	mu.Unlock()
	if len(steps) < 5 {
		t.Fatalf("only %d payloads streamed", len(steps))
	}
	// The held view must equal the REST view, seq included.
	var want map[string]any
	if err := json.Unmarshal(rest.View, &want); err != nil {
		t.Fatal(err)
	}
	want["seq"] = rest.Seq
	if window > 0 {
		// The stream held the newest messages; the pages bring the rest,
		// oldest last, each ending where the held messages begin.
		steps = append(steps, olderPages(t, tc, info.Thread, &steps)...)
		steps[len(steps)-1].Pick = []string{"messages", "state", "status", "seq", "warnings", "error"}
	}
	steps[len(steps)-1].Want, _ = json.Marshal(want)
	ok, errs := replay(t, steps)
	for _, e := range errs {
		t.Error(e)
	}
	if ok != len(steps) {
		t.Errorf("%d of %d payloads applied", ok, len(steps))
	}
	t.Logf("thread %s: %d payloads, final seq %d, %d messages", info.Thread, len(steps), rest.Seq, len(view.Messages))
}

// olderPages reads the pages of messages before the first one the
// applier holds after steps — that of the last view payload or structural
// change (the other windowed restatements keep what is held before them) —
// back to the first message.
func olderPages(t *testing.T, tc *threadcast, thread string, steps *[]step) []step {
	t.Helper()
	var first string
	for _, s := range *steps {
		var p struct {
			Type    string
			View    struct{ Messages []struct{ ID string } }
			Changes struct {
				AllMessages []struct{ ID string }
				View        *struct{ Messages []struct{ ID string } }
			}
		}
		_ = json.Unmarshal(s.Payload, &p)
		switch all := p.Changes.AllMessages; {
		case p.Type == "view" && len(p.View.Messages) > 0:
			first = p.View.Messages[0].ID
		case len(all) > 0 && p.Changes.View != nil && len(p.Changes.View.Messages) > 0:
			first = p.Changes.View.Messages[0].ID // the view restates the list
		case len(all) > 0:
			first = all[0].ID // a structural change replaces what is held
		}
	}
	if first == "" {
		t.Fatal("no windowed view in the stream")
	}
	var out []step
	for before := first; before != ""; {
		var page struct {
			First  int
			Before string
		}
		var raw json.RawMessage
		if code := tc.get(t, "acme", threadPath(thread)+"/messages?limit=4&before="+url.QueryEscape(before), &raw); code != 200 {
			t.Fatalf("page before %s: %d", before, code)
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		out = append(out, step{Page: raw})
		before = page.Before
		if len(out) > 100 {
			t.Fatal("paging does not end")
		}
	}
	if len(out) < 2 {
		t.Fatalf("only %d pages: the window held nearly everything", len(out))
	}
	return out
}
