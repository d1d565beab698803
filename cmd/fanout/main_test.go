package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

func TestParseConfig(t *testing.T) {
	key := "0123456789abcdef"
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{name: "no key", args: nil, wantErr: "auth-key"},
		{name: "short key", args: []string{"--auth-key", "short"}, wantErr: "auth-key"},
		{name: "flags", args: []string{"--auth-key", key, "--http", ":9999", "--heartbeat", "5s", "--queue-bytes", "4096"},
			check: func(t *testing.T, c config) {
				if c.HTTP != ":9999" || c.Fanout.Heartbeat != 5*time.Second || c.Fanout.Hub.QueueBytes != 4096 || string(c.Fanout.AuthKey) != key {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "backpressure flags", args: []string{"--auth-key", key, "--coalesce-bytes", "8192", "--send-buffer", "-1", "--client-unread-bytes", "4096"},
			check: func(t *testing.T, c config) {
				if c.Fanout.Hub.CoalesceBytes != 8192 || c.Fanout.SendBuffer != -1 || c.Fanout.UnreadBytes != 4096 {
					t.Fatalf("coalesce %d, send buffer %d, unread %d", c.Fanout.Hub.CoalesceBytes, c.Fanout.SendBuffer, c.Fanout.UnreadBytes)
				}
			}},
		{name: "backpressure env", env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_COALESCE_BYTES": "-1", "THREADCAST_SEND_BUFFER": "65536", "THREADCAST_CLIENT_UNREAD_BYTES": "-1"},
			check: func(t *testing.T, c config) {
				if c.Fanout.Hub.CoalesceBytes != -1 || c.Fanout.SendBuffer != 65536 || c.Fanout.UnreadBytes != -1 {
					t.Fatalf("coalesce %d, send buffer %d, unread %d", c.Fanout.Hub.CoalesceBytes, c.Fanout.SendBuffer, c.Fanout.UnreadBytes)
				}
			}},
		{name: "bad coalesce-bytes", args: []string{"--auth-key", key, "--coalesce-bytes", "lots"}, wantErr: "coalesce-bytes"},
		{name: "bad client-unread-bytes", args: []string{"--auth-key", key, "--client-unread-bytes", "8k"}, wantErr: "client-unread-bytes"},
		{name: "max-joins", args: []string{"--auth-key", key, "--max-joins", "7"},
			check: func(t *testing.T, c config) {
				if c.Fanout.MaxJoins != 7 {
					t.Fatalf("max joins %d", c.Fanout.MaxJoins)
				}
			}},
		{name: "max-joins env", env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_MAX_JOINS": "-1"},
			check: func(t *testing.T, c config) {
				if c.Fanout.MaxJoins != -1 {
					t.Fatalf("max joins %d", c.Fanout.MaxJoins)
				}
			}},
		{name: "bad max-joins", args: []string{"--auth-key", key, "--max-joins", "many"}, wantErr: "max-joins"},
		{name: "env", env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_MAX_LIFETIME": "1m", "THREADCAST_NATS_URL": "nats://x:1"},
			check: func(t *testing.T, c config) {
				if c.Fanout.MaxLifetime != time.Minute || c.NatsURL != "nats://x:1" {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "flag wins over env", args: []string{"--max-lifetime", "2m"}, env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_MAX_LIFETIME": "1m"},
			check: func(t *testing.T, c config) {
				if c.Fanout.MaxLifetime != 2*time.Minute {
					t.Fatalf("%v", c.Fanout.MaxLifetime)
				}
			}},
		{name: "snapshot retry", args: []string{"--snapshot-retry", "3s"}, env: map[string]string{"THREADCAST_AUTH_KEY": key},
			check: func(t *testing.T, c config) {
				if c.Fanout.Hub.SnapshotRetry != 3*time.Second {
					t.Fatalf("%v", c.Fanout.Hub.SnapshotRetry)
				}
			}},
		{name: "bad snapshot retry", args: []string{"--auth-key", key, "--snapshot-retry", "soon"}, wantErr: "snapshot-retry"},
		{name: "idle bounds: defaults", args: []string{"--auth-key", key},
			check: func(t *testing.T, c config) {
				d := fanout.DefaultHubConfig()
				if c.Fanout.Hub.MaxIdleFeedsPerTenant != d.MaxIdleFeedsPerTenant || c.Fanout.Hub.MaxIdleFeeds != d.MaxIdleFeeds {
					t.Fatalf("%+v", c.Fanout.Hub)
				}
			}},
		{name: "idle bounds: env and flag", args: []string{"--max-idle-threads", "500", "--idle-ring-bytes", "4096"},
			env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_MAX_IDLE_THREADS_PER_TENANT": "50", "THREADCAST_MAX_IDLE_THREADS": "900"},
			check: func(t *testing.T, c config) {
				if h := c.Fanout.Hub; h.MaxIdleFeedsPerTenant != 50 || h.MaxIdleFeeds != 500 || h.IdleRingBytes != 4096 {
					t.Fatalf("%+v", h)
				}
			}},
		{name: "idle ring from env", env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_IDLE_RING_BYTES": "8192", "THREADCAST_IDLE_TRIM_AFTER": "3s"},
			check: func(t *testing.T, c config) {
				if c.Fanout.Hub.IdleRingBytes != 8192 || c.Fanout.Hub.IdleTrimAfter != 3*time.Second {
					t.Fatalf("%+v", c.Fanout.Hub)
				}
			}},
		{name: "bad idle trim after", args: []string{"--auth-key", key, "--idle-trim-after", "soon"}, wantErr: "idle-trim-after"},
		{name: "bad idle ring bytes", args: []string{"--auth-key", key, "--idle-ring-bytes", "lots"}, wantErr: "idle-ring-bytes"},
		{name: "bad env", env: map[string]string{"THREADCAST_HEARTBEAT": "soon"}, wantErr: "THREADCAST_HEARTBEAT"},
		{name: "JWKS instead of a key", args: []string{"--jwks-url", "https://idp.example/jwks.json", "--issuer", "https://idp.example/", "--audience", "threadcast"},
			check: func(t *testing.T, c config) {
				if len(c.Fanout.AuthKey) != 0 || len(c.Tokens.JWKS) != 1 || c.Tokens.JWKS[0].URL != "https://idp.example/jwks.json" || c.Tokens.Audience != "threadcast" {
					t.Fatalf("%+v", c.Tokens)
				}
			}},
		{name: "JWKS without issuer", args: []string{"--jwks-file", "/jwks.json"}, wantErr: "--issuer is required"},
		{name: "short key beside a JWKS", args: []string{"--auth-key", "short", "--jwks-file", "/jwks.json", "--issuer", "i"}, wantErr: "auth-key"},
		{name: "bad log level", args: []string{"--auth-key", key, "--log-level", "loud"}, wantErr: "log level"},
		{name: "memory limit ratio: default and env", env: map[string]string{"THREADCAST_AUTH_KEY": key, "THREADCAST_MEMORY_LIMIT_RATIO": "0.75"},
			check: func(t *testing.T, c config) {
				if c.MemoryLimitRatio != 0.75 {
					t.Fatalf("%v", c.MemoryLimitRatio)
				}
			}},
		{name: "memory limit ratio above 1", args: []string{"--auth-key", key, "--memory-limit-ratio", "1.2"}, wantErr: "--memory-limit-ratio: memlimit: ratio 1.2 is not between 0 and 1"},
		{name: "connection cap and HTTP timeouts", args: []string{"--auth-key", key, "--max-conns", "50", "--http-idle-timeout", "7s", "--http-max-header-bytes", "32768"},
			env: map[string]string{"THREADCAST_HTTP_HEADER_TIMEOUT": "3s"},
			check: func(t *testing.T, c config) {
				if c.MaxConns != 50 || c.Fanout.IdleTimeout != 7*time.Second || c.Fanout.ReadHeaderTimeout != 3*time.Second || c.Fanout.MaxHeaderBytes != 32768 {
					t.Fatalf("cap %d, idle %v, header %v, header bytes %d", c.MaxConns, c.Fanout.IdleTimeout, c.Fanout.ReadHeaderTimeout, c.Fanout.MaxHeaderBytes)
				}
				if nc := (&app{cfg: c}).nodeConfig(); nc.HTTPMaxHeaderBytes != 32768 {
					t.Fatalf("the node's header bound %d", nc.HTTPMaxHeaderBytes)
				}
			}},
		{name: "connection cap defaults below the fd limit", args: []string{"--auth-key", key},
			check: func(t *testing.T, c config) {
				if c.MaxConns <= 0 || c.Fanout.IdleTimeout != 2*time.Minute || c.Fanout.ReadHeaderTimeout != 10*time.Second {
					t.Fatalf("cap %d, idle %v, header %v", c.MaxConns, c.Fanout.IdleTimeout, c.Fanout.ReadHeaderTimeout)
				}
			}},
		{name: "connection cap over the fd limit", args: []string{"--auth-key", key, "--max-conns", "100000000"}, wantErr: "--max-conns: connlimit: connection cap does not fit"},
		{name: "extra args", args: []string{"--auth-key", key, "serve"}, wantErr: "unexpected"},
		{name: "creds and nkey", args: []string{"--auth-key", key, "--nats-creds", "a.creds", "--nats-nkey", "b.nk"}, wantErr: "two identities"},
		{name: "nkey", args: []string{"--auth-key", key, "--nats-nkey", "b.nk"},
			check: func(t *testing.T, c config) {
				if c.NatsNkey != "b.nk" {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "help", args: []string{"--help"}, wantErr: "help requested"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// The app serves health and metrics, drains on cancel, and leaves no
// goroutine behind.
func TestAppRunAndDrain(t *testing.T) {
	ns := natstest.Start(t, natstest.NoJetStream)
	base := testsupport.CountGoroutines()

	cfg, err := parseConfig([]string{"--auth-key", "0123456789abcdef", "--http", "127.0.0.1:0", "--nats-url", ns.ClientURL(), "--drain", "5s"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(cfg, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.ready:
	case err := <-done:
		t.Fatal(err)
	}
	url := "http://" + a.addr.String()
	for _, tt := range []struct {
		path, want string
	}{
		{"/livez", "ok"},
		{"/readyz", "ok"},
		{"/metrics", "threadcast_fanout_subscribers"},
		{"/v1/threads", "missing_token"},
	} {
		resp, err := http.Get(url + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), tt.want) {
			t.Fatalf("%s: %q, want %q", tt.path, b, tt.want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	base.Exited(t)
}

// TestAppBadNkey: an unreadable --nats-nkey is a start-up error naming it.
func TestAppBadNkey(t *testing.T) {
	cfg, err := parseConfig([]string{"--auth-key", "0123456789abcdef", "--http", "127.0.0.1:0", "--nats-nkey", t.TempDir() + "/missing.nk"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := newApp(cfg, io.Discard).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "--nats-nkey") {
		t.Errorf("Run: %v, want an error naming --nats-nkey", err)
	}
}
