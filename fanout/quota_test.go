package fanout

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/quota"
)

// refusal GETs url with tok and returns a 429's fields and body (it fails
// the test on any other status).
func refusal(t *testing.T, url, tok string) (http.Header, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("GET %s: %d %s, want 429", url, resp.StatusCode, raw)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	return resp.Header, body
}

func wantQuotaRefusal(t *testing.T, h http.Header, body map[string]any, policy, limit, name string) {
	t.Helper()
	if got := h.Get("RateLimit-Policy"); got != policy {
		t.Errorf("RateLimit-Policy %q, want %q", got, policy)
	}
	if got := h.Get("RateLimit"); got != limit {
		t.Errorf("RateLimit %q, want %q", got, limit)
	}
	if h.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q, want 5", h.Get("Retry-After"))
	}
	q, _ := body["quota"].(map[string]any)
	if body["error"] != "over_quota" || q == nil || q["quota"] != name {
		t.Errorf("body %v, want over_quota naming %s", body, name)
	}
}

// TestQuotaStreamsThreadsTaps: each of the fanout's quotas refuses the
// stream over it with 429, the draft's fields and the quota named, costs
// another tenant nothing, and is given back when a stream ends.
func TestQuotaStreamsThreadsTaps(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	for _, tenant := range []string{"acme", "zeta"} {
		for _, id := range []string{"t1", "t2", "t3"} {
			newTestThread(t, pub, tenant, id).publish(t, "a;")
		}
	}
	srv, hs := newServer(t, nc, func(c *Config) {
		c.Quota.Default = quota.Limits{Streams: 5, Threads: 2, Taps: 1}
	})
	acme, zeta := token(t, "acme"), token(t, "zeta")
	events := func(id string) string { return hs.URL + "/v1/threads/" + id + "/events" }

	// Threads: two streams on t1 and one on t2 are two threads; t3 is a third.
	a1 := openSSE(t, events("t1"), acme, nil)
	openSSE(t, events("t1"), acme, nil)
	openSSE(t, events("t2"), acme, nil)
	h, body := refusal(t, events("t3"), acme)
	wantQuotaRefusal(t, h, body, `"threads";q=2;qu="concurrency"`, `"threads";r=0;t=5`, "threads")
	openSSE(t, events("t3"), zeta, nil) // zeta's threads are its own

	// Taps: one; the refused one took no stream either.
	tap := hs.URL + "/v1/tap"
	openSSE(t, tap, acme, nil)
	h, body = refusal(t, tap, acme)
	wantQuotaRefusal(t, h, body, `"taps";q=1;qu="concurrency"`, `"taps";r=0;t=5`, "taps")
	if u := srv.quota.Usage("acme"); u.Streams != 4 || u.Taps != 1 || u.Threads != 2 {
		t.Fatalf("acme usage %+v, want 4 streams, 1 tap, 2 threads", u)
	}

	// Streams: five are open (four threads' and the tap).
	openSSE(t, events("t2"), acme, nil)
	h, body = refusal(t, events("t1"), acme)
	wantQuotaRefusal(t, h, body, `"streams";q=5;qu="concurrency"`, `"streams";r=0;t=5`, "streams")
	openSSE(t, tap, zeta, nil)

	// Given back: one of t1's two streams ends; t1 is still subscribed.
	a1.close()
	testsupport.WaitFor(t, 5*time.Second, "a stream given back", func() bool { return srv.quota.Usage("acme").Streams == 4 })
	if u := srv.quota.Usage("acme"); u.Threads != 2 {
		t.Fatalf("threads %d after one of t1's streams ended, want 2", u.Threads)
	}
	h, body = refusal(t, events("t3"), acme) // a stream is free, a thread is not
	wantQuotaRefusal(t, h, body, `"threads";q=2;qu="concurrency"`, `"threads";r=0;t=5`, "threads")
	openSSE(t, events("t1"), acme, nil)

	m := srv.Metrics().QuotaRefused
	for kind, want := range map[string]float64{"threads": 2, "taps": 1, "streams": 1} {
		if got := counterValue(m.WithLabelValues("acme", kind)); got != want {
			t.Errorf("quota_refused_total{acme,%s} = %v, want %v", kind, got, want)
		}
	}
	if got := counterValue(m.WithLabelValues("zeta", "threads")); got != 0 {
		t.Errorf("zeta refused %v times", got)
	}
}

func TestQuotaConfigRefused(t *testing.T) {
	ns := startNATS(t)
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	cfg.Quota.Default.Taps = -1
	if _, err := New(connect(t, ns), cfg, nil); err == nil {
		t.Fatal("a negative quota was accepted")
	}
}
