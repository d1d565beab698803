package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/web"
	"github.com/threadcast/threadcast/wire"
)

// threadcast is Threadcast assembled in the test process the way
// cmd/threadcast assembles it: an embedded NATS server with JetStream,
// ingest, the fanout's HTTP API, and the dashboard, on one port: at "/"
// offering the test tenants' tokens, at "/plain/" offering none.
type threadcast struct {
	URL    string
	nc     *nats.Conn
	key    []byte
	tokens map[string]string
}

var testTenants = []string{"acme", "globex", "initech"}

// startThreadcast starts it; everything stops in t.Cleanup, every
// goroutine it started waited for. tune, if given, adjusts the fanout's
// configuration.
func startThreadcast(t *testing.T, tune ...func(*fanout.Config)) *threadcast {
	t.Helper()
	sc := natsembed.DefaultConfig()
	sc.StoreDir = t.TempDir()
	srv, err := natsembed.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	reg := prometheus.NewRegistry()
	pc := pipeline.DefaultConfig()
	pc.Partitions = 8
	pc.Logger = slog.New(slog.DiscardHandler)
	pc.Metrics = pipeline.NewMetrics(reg)
	in, err := pipeline.NewIngest(nc, pc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := in.Run(ctx, 5*time.Second); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ingest: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	testsupport.WaitFor(t, 10*time.Second, "ingest ready", in.Ready)

	tc := &threadcast{nc: nc, key: make([]byte, 32), tokens: map[string]string{}}
	_, _ = rand.Read(tc.key)
	fc := fanout.DefaultConfig()
	fc.AuthKey = tc.key
	fc.Hub.Partitions = pc.Partitions
	for _, f := range tune {
		f(&fc)
	}
	fs, err := fanout.New(nc, fc, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tenants []web.Tenant
	for _, name := range testTenants {
		tok, err := auth.Mint(tc.key, auth.Claims{Tenant: name, Expiry: time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		tc.tokens[name] = tok
		tenants = append(tenants, web.Tenant{Tenant: name, Token: tok})
	}
	dash, err := web.Handler(web.Config{Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	// The dashboard as a deployment without development tokens serves it:
	// the visitor brings a token (#token=…).
	plain, err := web.Handler(web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/plain/", http.StripPrefix("/plain", plain))
	mux.Handle("/v1/", fs.Handler())
	mux.Handle("/readyz", fs.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, fs.Registry()}, promhttp.HandlerOpts{}))
	mux.Handle("/", dash)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() { fs.Drain(); hs.Close() })
	tc.URL = hs.URL
	return tc
}

// playDemo runs demo agents through the SDK until the returned stop is
// called, or until they are done (with ThreadsPerAgent): done is closed
// then. stop also closes the publisher, after which every event is stored.
func (tc *threadcast) playDemo(t *testing.T, cfg demo.Config) (stop func() demo.Stats, done <-chan struct{}) {
	t.Helper()
	pub, err := agent.New(tc.nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stats demo.Stats
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var err error
		if stats, err = demo.Run(ctx, demo.AgentPublisher(pub), cfg); err != nil {
			t.Errorf("demo: %v", err)
		}
	}()
	var once sync.Once
	stop = func() demo.Stats {
		once.Do(func() {
			cancel()
			<-finished
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			if err := pub.Close(cctx); err != nil {
				t.Errorf("publisher close: %v", err)
			}
		})
		return stats
	}
	t.Cleanup(func() { stop() })
	return stop, finished
}

// get fetches path with the tenant's token and decodes the JSON answer.
func (tc *threadcast) get(t *testing.T, tenant, path string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", tc.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+tc.tokens[tenant])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK && v != nil {
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode
}

// sse opens an SSE stream and delivers each message's data to the returned
// channel until ctx ends.
func (tc *threadcast) sse(t *testing.T, ctx context.Context, tenant, path string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", tc.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+tc.tokens[tenant])
	st, status := testsupport.OpenSSE(t, req)
	if st == nil {
		t.Fatalf("GET %s: %d %s", path, status, http.StatusText(status))
	}
	out := make(chan string, 4096)
	go func() {
		defer close(out)
		defer st.Close()
		for {
			ev, err := st.Next()
			if err != nil {
				return
			}
			if !ev.HasData {
				continue
			}
			select {
			case out <- ev.Data:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func threadPath(id string) string { return "/v1/threads/" + url.PathEscape(id) }

// batchMsg is one JetStream message holding evs as a batch (one event a
// line, Tc-Batch counting them) on the thread's event subject.
func batchMsg(t *testing.T, tenant, thread string, evs []json.RawMessage) *nats.Msg {
	t.Helper()
	subj, err := wire.EventSubject(tenant, thread)
	if err != nil {
		t.Fatal(err)
	}
	lines := make([][]byte, len(evs))
	for k, e := range evs {
		lines[k] = e
	}
	return &nats.Msg{Subject: subj, Data: bytes.Join(lines, []byte("\n")),
		Header: nats.Header{wire.HeaderBatch: {strconv.Itoa(len(evs))}}}
}
