package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

func TestParseConfigPartitionMode(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		give    []string
		env     map[string]string
		check   func(c config) error
		wantErr string
	}{
		{name: "static by default", check: func(c config) error {
			if c.PartitionMode != "static" || c.Pipeline.Domain != "" {
				return fmt.Errorf("%+v", c)
			}
			return nil
		}},
		{name: "lease from env", env: map[string]string{"THREADCAST_PARTITION_MODE": "lease", "THREADCAST_LEASE_TTL": "4s",
			"THREADCAST_LEASE_HOLDER": "tc-ingest-1", "THREADCAST_REPLICAS": "3", "THREADCAST_PARTITIONS": "32", "THREADCAST_JS_DOMAIN": "hub"},
			check: func(c config) error {
				l := c.Lease
				if c.PartitionMode != "lease" || l.TTL != 4*time.Second || l.Holder != "tc-ingest-1" || l.Replicas != 3 ||
					l.Partitions != 32 || l.Domain != "hub" || l.Bucket != pipeline.DefaultLeaseKV || c.Pipeline.Domain != "hub" {
					return fmt.Errorf("%+v", l)
				}
				return nil
			}},
		{name: "default holder: host name made a token, random suffix", give: []string{"--partition-mode", "lease"},
			env: map[string]string{"HOSTNAME": "node.a b"}, check: func(c config) error {
				if !strings.HasPrefix(c.Lease.Holder, "node-a-b-") || len(c.Lease.Holder) != len("node-a-b-")+6 {
					return fmt.Errorf("holder %q", c.Lease.Holder)
				}
				return nil
			}},
		{name: "bad mode", give: []string{"--partition-mode", "dynamic"}, wantErr: `--partition-mode "dynamic"`},
		{name: "short ttl", give: []string{"--partition-mode", "lease", "--lease-ttl", "100ms"}, wantErr: "lease ttl"},
		{name: "holder not a token", give: []string{"--partition-mode", "lease", "--lease-holder", "a.b"}, wantErr: "holder"},
	}
	for _, tt := range tests {
		c, err := parseConfig(tt.give, env(tt.env))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if err := tt.check(c); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestRunLeaseMode runs the command in lease mode against its embedded
// server: it becomes ready, holds every partition's lease in
// THREADCAST_LEASES, reduces a thread, and releases its leases on drain.
func TestRunLeaseMode(t *testing.T) {
	cfg, err := parseConfig([]string{
		"--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--partitions", "4", "--log-level", "error", "--partition-mode", "lease", "--lease-ttl", "2s", "--lease-holder", "solo",
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(cfg, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	addr := "http://" + <-a.httpAddr
	url := <-a.natsURL
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	testsupport.WaitForErr(t, 20*time.Second, "/readyz", func() error {
		if code, body, err := get(addr + "/readyz"); err != nil || code != 200 {
			return fmt.Errorf("readyz %d %q %v", code, body, err)
		}
		kv, err := js.KeyValue(t.Context(), pipeline.DefaultLeaseKV)
		if err != nil {
			return err
		}
		for p := range 4 {
			e, err := kv.Get(t.Context(), fmt.Sprintf("p.%d", p))
			if err != nil {
				return fmt.Errorf("lease %d: %w", p, err)
			}
			if string(e.Value()) != "solo" {
				return fmt.Errorf("lease %d held by %q", p, e.Value())
			}
		}
		return nil
	})

	if code, body, _ := get(addr + "/metrics"); code != 200 || !strings.Contains(body, "threadcast_ingest_leases_held 4") ||
		!strings.Contains(body, `threadcast_ingest_lease_events_total{event="acquired"} 4`) {
		t.Errorf("metrics %d: lease gauges missing", code)
	}
	subj, _ := wire.EventSubject("acme", "lease-thread")
	for _, ev := range []string{`{"type":"RUN_STARTED","threadId":"lease-thread","runId":"r1"}`,
		`{"type":"RUN_FINISHED","threadId":"lease-thread","runId":"r1"}`} {
		if _, err := js.Publish(t.Context(), subj, []byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.WaitForErr(t, 20*time.Second, "the snapshot of lease-thread", func() error {
		tok := wire.EncodeThread("lease-thread")
		msg, err := nc.Request(wire.SnapSubject(wire.Partition("acme", tok, 4), "acme", tok), nil, 2*time.Second)
		if err != nil {
			return err
		}
		snap, err := wire.ParseSnapshot(msg)
		if err != nil || snap.Status != "finished" {
			return fmt.Errorf("snapshot %+v %v", snap, err)
		}
		return nil
	})

	kv, err := js.KeyValue(t.Context(), pipeline.DefaultLeaseKV)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(t.Context(), "p.*", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	released := 0
	cancel()
	timeout := time.After(20 * time.Second)
	for released < 4 {
		select {
		case e := <-w.Updates():
			if e != nil && e.Operation() == jetstream.KeyValueDelete {
				released++
			}
		case <-timeout:
			t.Fatalf("%d of 4 leases released on drain", released)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
