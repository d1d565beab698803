package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/memlimit"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		give    []string
		env     map[string]string
		check   func(c config) error
		wantErr string
	}{
		{name: "connection cap and HTTP timeouts", give: []string{"--max-conns", "50", "--http-idle-timeout", "7s", "--http-max-header-bytes", "32768"},
			env: map[string]string{"THREADCAST_HTTP_HEADER_TIMEOUT": "3s"},
			check: func(c config) error {
				if c.MaxConns != 50 || c.IdleTimeout != 7*time.Second || c.HeaderTimeout != 3*time.Second || c.MaxHeaderBytes != 32768 {
					return fmt.Errorf("cap %d, idle %v, header %v, header bytes %d", c.MaxConns, c.IdleTimeout, c.HeaderTimeout, c.MaxHeaderBytes)
				}
				if nc := (&app{cfg: c}).nodeConfig(); nc.HTTPMaxHeaderBytes != 32768 {
					return fmt.Errorf("the node's header bound %d", nc.HTTPMaxHeaderBytes)
				}
				return nil
			}},
		{name: "no header bound", give: []string{"--http-max-header-bytes", "0"}, wantErr: "--http-max-header-bytes"},
		{name: "connection cap over the fd limit", give: []string{"--max-conns", "100000000"}, wantErr: "--max-conns: connlimit: connection cap does not fit"},
		{name: "no idle timeout", give: []string{"--http-idle-timeout", "0s"}, wantErr: "--http-idle-timeout"},
		{name: "defaults", check: func(c config) error {
			if c.NatsURL != "" || c.Pipeline.Partitions != wire.DefaultParts || c.Pipeline.Instances != 1 {
				return fmt.Errorf("%+v", c)
			}
			return nil
		}},
		{name: "env", env: map[string]string{"THREADCAST_NATS_URL": "nats://x:4222", "THREADCAST_INSTANCE": "1", "THREADCAST_INSTANCES": "3", "THREADCAST_TAP": "false"},
			check: func(c config) error {
				if c.NatsURL != "nats://x:4222" || c.Pipeline.Instance != 1 || c.Pipeline.Instances != 3 || c.Pipeline.Tap {
					return fmt.Errorf("%+v", c)
				}
				return nil
			}},
		{name: "OTLP off by default, on by flag or OTEL_ variable", check: func(c config) error {
			if c.OTLP.Enabled {
				return fmt.Errorf("OTLP on: %+v", c.OTLP)
			}
			return nil
		}},
		{name: "OTLP flags", give: []string{"--otlp-endpoint", "http://127.0.0.1:4318", "--otlp-exclude-tenants", "a,b"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "THREADCAST_OTLP_CONTENT": "true"},
			check: func(c config) error {
				if !c.OTLP.Enabled || c.OTLP.Endpoint != "http://127.0.0.1:4318" || c.OTLP.Protocol != "grpc" || !c.OTLP.Content || len(c.OTLP.ExcludeTenants) != 2 {
					return fmt.Errorf("%+v", c.OTLP)
				}
				return nil
			}},
		{name: "OTLP endpoint from OTEL_", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
			check: func(c config) error {
				if !c.OTLP.Enabled || c.OTLP.Endpoint != "" || c.OTLP.Protocol != "http" {
					return fmt.Errorf("%+v", c.OTLP)
				}
				return nil
			}},
		{name: "OTLP protocol", give: []string{"--otlp-protocol", "thrift"}, wantErr: "--otlp-protocol"},
		{name: "flag over env", give: []string{"--partitions", "16"}, env: map[string]string{"THREADCAST_PARTITIONS": "32"},
			check: func(c config) error {
				if c.Pipeline.Partitions != 16 {
					return fmt.Errorf("partitions %d", c.Pipeline.Partitions)
				}
				return nil
			}},
		{name: "consumer storage and snapshot queue", give: []string{"--snapshot-queue", "64"}, env: map[string]string{"THREADCAST_CONSUMER_MEMORY": "false"},
			check: func(c config) error {
				if c.Pipeline.ConsumerMemory || c.Pipeline.SnapshotQueue != 64 {
					return fmt.Errorf("consumer memory %v, snapshot queue %d", c.Pipeline.ConsumerMemory, c.Pipeline.SnapshotQueue)
				}
				return nil
			}},
		{name: "JWKS for the bridge", give: []string{"--jwks-file", "/jwks.json", "--issuer", "i", "--token-clock-skew", "0s"}, check: func(c config) error {
			if tk := c.Tokens; len(tk.JWKS) != 1 || tk.JWKS[0].File != "/jwks.json" || tk.JWKS[0].Issuer != "i" || tk.ClockSkew != 0 {
				return fmt.Errorf("%+v", tk)
			}
			return nil
		}},
		{name: "bad JWKS flags", give: []string{"--issuer", "i"}, wantErr: "--issuer needs"},
		{name: "checkpoint ack timeout", give: []string{"--checkpoint-ack-timeout", "45s"}, check: func(c config) error {
			if c.Pipeline.CheckpointAckTimeout != 45*time.Second {
				return fmt.Errorf("checkpoint ack timeout %v", c.Pipeline.CheckpointAckTimeout)
			}
			return nil
		}},
		{name: "zero checkpoint ack timeout", give: []string{"--checkpoint-ack-timeout", "0s"}, wantErr: "checkpoint ack timeout"},
		{name: "defaults: memory consumers, default snapshot queue", check: func(c config) error {
			if !c.Pipeline.ConsumerMemory || c.Pipeline.SnapshotQueue != pipeline.DefaultSnapshotQueue {
				return fmt.Errorf("consumer memory %v, snapshot queue %d", c.Pipeline.ConsumerMemory, c.Pipeline.SnapshotQueue)
			}
			return nil
		}},
		{name: "negative snapshot queue", give: []string{"--snapshot-queue", "-1"}, wantErr: "snapshot queue"},
		{name: "bad env", env: map[string]string{"THREADCAST_SHARDS": "many"}, wantErr: "THREADCAST_SHARDS"},
		{name: "bad instance", give: []string{"--instance", "3", "--instances", "3"}, wantErr: "instance 3 of 3"},
		{name: "bad log level", give: []string{"--log-level", "loud"}, wantErr: "log level"},
		{name: "memory limit ratio default", check: func(c config) error {
			if c.MemoryLimitRatio != memlimit.DefaultRatio {
				return fmt.Errorf("ratio %v", c.MemoryLimitRatio)
			}
			return nil
		}},
		{name: "memory limit ratio off by env", env: map[string]string{"THREADCAST_MEMORY_LIMIT_RATIO": "0"}, check: func(c config) error {
			if c.MemoryLimitRatio != 0 {
				return fmt.Errorf("ratio %v", c.MemoryLimitRatio)
			}
			return nil
		}},
		{name: "negative memory limit ratio", give: []string{"--memory-limit-ratio", "-0.5"}, wantErr: "--memory-limit-ratio: memlimit: ratio -0.5 is not between 0 and 1"},
		{name: "extra args", give: []string{"x"}, wantErr: "unexpected arguments"},
		{name: "help", give: []string{"-h"}, wantErr: "help requested"},
		{name: "short key", give: []string{"--auth-key", "short"}, wantErr: "at least 16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.give, env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.check(c); err != nil {
				t.Error(err)
			}
		})
	}
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestRunEmbedded runs the command's app with an embedded server: it gets
// ready, takes events through the HTTP bridge, reduces them, serves metrics,
// and on cancel drains and returns with every goroutine stopped.
func TestRunEmbedded(t *testing.T) {
	base := testsupport.CountGoroutines()
	key := "test-key-0123456789abcdef"
	cfg, err := parseConfig([]string{
		"--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--partitions", "4", "--auth-key", key, "--log-level", "error",
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

	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, err := get(addr + "/readyz")
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d %v", code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body, _ := get(addr + "/livez"); code != 200 || body != "ok\n" {
		t.Errorf("livez %d %q", code, body)
	}

	tok, err := auth.Mint([]byte(key), auth.Claims{Tenant: "acme", Scope: "read publish", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"RUN_STARTED","threadId":"th.1","runId":"r1"}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"hello"}
{"type":"RUN_FINISHED","threadId":"th.1","runId":"r1"}
`
	for _, tt := range []struct {
		tenant, token string
		want          int
	}{{"acme", tok, 200}, {"other", tok, 403}, {"acme", "", 401}} {
		req, _ := http.NewRequest("POST", addr+"/v1/ingest/"+tt.tenant+"/th.1", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("bridge %s: %d %s, want %d", tt.tenant, resp.StatusCode, b, tt.want)
		}
	}

	// With --auth-key the embedded server is locked: no anonymous client;
	// this test reads snapshots with the process's own identity.
	if anon, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		anon.Close()
		t.Error("an anonymous client connected to the locked embedded server")
	}
	nc, err := a.node.Connect("ingest-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		tokn := wire.EncodeThread("th.1")
		msg, err := nc.Request(wire.SnapSubject(wire.Partition("acme", tokn, 4), "acme", tokn), nil, 2*time.Second)
		if err == nil {
			snap, err := wire.ParseSnapshot(msg)
			if err == nil && snap.Status == "finished" && strings.Contains(string(snap.View), `"hello"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread not reduced: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	nc.Close()
	if code, body, _ := get(addr + "/metrics"); code != 200 || !strings.Contains(body, `threadcast_ingest_events_total{type="RUN_FINISHED"} 1`) ||
		!strings.Contains(body, "threadcast_bridge_events_accepted_total 3") {
		t.Errorf("metrics %d, RUN_FINISHED or bridge accepted count missing", code)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	base.Exited(t)
}
