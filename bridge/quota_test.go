package bridge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// quotaBridge starts a bridge holding tenants to def, on a clock that
// never moves (buckets never refill: every count is exact).
func quotaBridge(t *testing.T, def quota.Limits) (*bridgeEnv, *quota.Limiter) {
	t.Helper()
	qc := quota.DefaultConfig()
	qc.Default = def
	t0 := time.Unix(1_700_000_000, 0)
	qc.Now = func() time.Time { return t0 }
	q, err := quota.New(qc)
	if err != nil {
		t.Fatal(err)
	}
	return startBridge(t, func(c *bridge.Config) { c.Quota = q }), q
}

func jsonlEvents(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%04d"}`+"\n", i)
	}
	return b.String()
}

// wantRefusal checks a 429: status, the draft's fields, the body's quota
// and the count of events stored before the refusal.
func wantRefusal(t *testing.T, status int, h http.Header, resp bridge.Response, policy, limit string, accepted int) {
	t.Helper()
	if status != http.StatusTooManyRequests {
		t.Fatalf("status %d (%+v), want 429", status, resp)
	}
	name := policy[1 : strings.Index(policy[1:], `"`)+1]
	if resp.Quota == nil || resp.Quota.Quota != name || resp.Error == "" {
		t.Fatalf("body %+v, want quota %q named", resp, name)
	}
	if got := h.Get("RateLimit-Policy"); got != policy {
		t.Errorf("RateLimit-Policy %q, want %q", got, policy)
	}
	if got := h.Get("RateLimit"); got != limit {
		t.Errorf("RateLimit %q, want %q", got, limit)
	}
	if h.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if resp.Accepted != accepted {
		t.Errorf("accepted %d, want %d", resp.Accepted, accepted)
	}
}

func TestBridgeQuotaEventsPerSec(t *testing.T) {
	env, _ := quotaBridge(t, quota.Limits{EventsPerSec: 10, EventsBurst: 5})
	status, h, resp := env.post(t, "acme", "t", "", strings.NewReader(jsonlEvents(0, 8)))
	wantRefusal(t, status, h, resp, `"events_per_sec";q=10;w=1`, `"events_per_sec";r=0;t=1`, 5)
	if resp.Events != 5 || resp.Quota.Limit != 10 || resp.Quota.WindowSeconds != 1 {
		t.Errorf("body %+v", resp)
	}
	if n := env.storedCount(t); n != 5 {
		t.Errorf("%d events stored, want the 5 accepted", n)
	}
	// The bucket is empty: the next request is refused at its first event.
	status, h, resp = env.post(t, "acme", "t", "", strings.NewReader(jsonlEvents(8, 1)))
	wantRefusal(t, status, h, resp, `"events_per_sec";q=10;w=1`, `"events_per_sec";r=0;t=1`, 0)
	// Another tenant's bucket is its own.
	if status, _, resp := env.post(t, "beta", "t", "", strings.NewReader(jsonlEvents(0, 5))); status != http.StatusOK || resp.Accepted != 5 {
		t.Fatalf("tenant beta: %d %+v", status, resp)
	}
	if got := env.br.Stats().OverQuota; got != 2 {
		t.Errorf("OverQuota %d, want 2", got)
	}
	if got := refusedMetric(t, env.br, "acme", "events_per_sec"); got != 2 {
		t.Errorf("quota_refused_total{acme,events_per_sec} = %v, want 2", got)
	}
}

func refusedMetric(t *testing.T, br *bridge.Bridge, tenant, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(br.Collectors()...)
	return gathered(t, reg, "threadcast_bridge_quota_refused_total", map[string]string{"tenant": tenant, "quota": kind})
}

// gathered is the value of the series of family name with labels in reg
// (0 when absent).
func gathered(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestBridgeQuotaBytesPerSec(t *testing.T) {
	ev := jsonlEvents(0, 1) // 62 bytes with its newline; 61 without
	env, _ := quotaBridge(t, quota.Limits{BytesPerSec: 100, BytesBurst: 100})
	status, h, resp := env.post(t, "acme", "t", "", strings.NewReader(jsonlEvents(0, 3)))
	wantRefusal(t, status, h, resp, `"bytes_per_sec";q=100;w=1;qu="content-bytes"`,
		fmt.Sprintf(`"bytes_per_sec";r=%d;t=1`, 100-(len(ev)-1)), 1)
	if n := env.storedCount(t); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
}

// TestBridgeQuotaBodyDeclared: a Content-Length that would take the
// tenant's body bytes in flight over the quota is refused before the body
// is read, while another request holds them; once that one ends, the same
// request passes.
func TestBridgeQuotaBodyDeclared(t *testing.T) {
	body := jsonlEvents(0, 1)
	env, q := quotaBridge(t, quota.Limits{BodyBytesInFlight: int64(len(body)) + 10})

	// Too large on its own: refused, nothing read or stored.
	big := jsonlEvents(0, 2)
	status, h, resp := env.post(t, "acme", "t", "", strings.NewReader(big))
	wantRefusal(t, status, h, resp, fmt.Sprintf(`"body_bytes_in_flight";q=%d;qu="content-bytes"`, len(body)+10),
		fmt.Sprintf(`"body_bytes_in_flight";r=%d;t=5`, len(body)+10), 0)

	// One request in flight holds len(body) bytes until its body ends.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/ingest/acme/held", pr)
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", bridgeToken)
	done := make(chan int, 1)
	go func() {
		resp, err := env.http.Client().Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	bridgeWaitFor(t, 10*time.Second, "the held request's body bytes taken", func() bool { return q.Usage("acme").Body == int64(len(body)) })
	status, h, resp = env.post(t, "acme", "t", "", strings.NewReader(body))
	wantRefusal(t, status, h, resp, fmt.Sprintf(`"body_bytes_in_flight";q=%d;qu="content-bytes"`, len(body)+10),
		`"body_bytes_in_flight";r=10;t=5`, 0)
	if status, _, resp := env.post(t, "beta", "t", "", strings.NewReader(body)); status != http.StatusOK {
		t.Fatalf("tenant beta while acme is at its quota: %d %+v", status, resp)
	}
	if _, err := pw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if st := <-done; st != http.StatusOK {
		t.Fatalf("held request: %d", st)
	}
	if u := q.Usage("acme"); u.Body != 0 {
		t.Fatalf("%d body bytes still held after every request ended", u.Body)
	}
	if status, _, resp := env.post(t, "acme", "t", "", strings.NewReader(body)); status != http.StatusOK || resp.Accepted != 1 {
		t.Fatalf("after the held request ended: %d %+v", status, resp)
	}
}

// TestBridgeQuotaBodyChunked: a body of unknown length is read until it
// would take the bytes in flight over the quota; the events read before
// are stored and counted.
func TestBridgeQuotaBodyChunked(t *testing.T) {
	const limit = 1000
	env, q := quotaBridge(t, quota.Limits{BodyBytesInFlight: limit})
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		for i := 0; i < 100; i++ { // one event per write: the bridge reads them one by one
			if _, err := pw.Write([]byte(jsonlEvents(i, 1))); err != nil {
				return // the bridge stopped reading
			}
		}
	}()
	status, h, resp := env.post(t, "acme", "t", "", pr)
	if status != http.StatusTooManyRequests {
		t.Fatalf("status %d %+v", status, resp)
	}
	wantRefusal(t, status, h, resp, `"body_bytes_in_flight";q=1000;qu="content-bytes"`, h.Get("RateLimit"), resp.Accepted)
	if resp.Accepted == 0 || resp.Accepted*len(jsonlEvents(0, 1)) > limit {
		t.Fatalf("accepted %d events of %d bytes, want some, within %d bytes", resp.Accepted, len(jsonlEvents(0, 1)), limit)
	}
	if n := env.storedCount(t); n != resp.Accepted {
		t.Errorf("%d stored, %d accepted", n, resp.Accepted)
	}
	if u := q.Usage("acme"); u.Body != 0 {
		t.Errorf("%d body bytes still held", u.Body)
	}
}

// TestBridgeQuotaRetained: a tenant whose messages in the log reach its
// quota (counted by a RetainedCounter from the real stream) is refused
// before its body is read; another tenant is not.
func TestBridgeQuotaRetained(t *testing.T) {
	qc := quota.DefaultConfig()
	qc.Tenants = map[string]quota.Limits{"acme": {EventsRetained: 3}}
	var rc *pipeline.RetainedCounter
	env := startBridge(t, func(c *bridge.Config) {
		c.Retained = func(tenant string) error { return rc.Check(tenant) }
	})
	rc = pipeline.NewRetainedCounter(env.js, wire.DefaultStream, qc, time.Hour, nil)
	for i := 0; i < 3; i++ { // one message each: every request waits for its ack
		if status, _, resp := env.post(t, "acme", "t", "", strings.NewReader(jsonlEvents(i, 1))); status != http.StatusOK {
			t.Fatalf("post %d before the poll: %d %+v", i, status, resp)
		}
	}
	if err := rc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rc.Count("acme"); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
	status, h, resp := env.post(t, "acme", "t", "", strings.NewReader(jsonlEvents(3, 1)))
	wantRefusal(t, status, h, resp, `"events_retained";q=3`, `"events_retained";r=0;t=3600`, 0)
	if n := env.storedCount(t); n != 3 {
		t.Errorf("%d stored, want 3", n)
	}
	if status, _, _ := env.post(t, "beta", "t", "", strings.NewReader(jsonlEvents(0, 1))); status != http.StatusOK {
		t.Fatalf("tenant beta: %d", status)
	}
	if rc.Count("beta") != -1 {
		t.Error("a tenant without a retained quota is tracked")
	}
}
