package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// pubServer starts an embedded JetStream server with the event stream and
// returns its URL and a JetStream context to read the stream back.
func pubServer(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	scfg := natsembed.DefaultConfig()
	scfg.StoreDir = t.TempDir()
	srv, err := natsembed.Start(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL(), js
}

// pubStored returns the stored events of the stream, in order, as text.
func pubStored(t *testing.T, js jetstream.JetStream, wantSubjectThread string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, tok, _ := wire.ParseStoredSubject(m.Subject); tok != wire.EncodeThread(wantSubjectThread) {
			t.Errorf("seq %d on %s, want thread %q", seq, m.Subject, wantSubjectThread)
		}
		out = append(out, strings.Split(string(m.Data), "\n")...)
	}
	return out
}

func TestPublishCommand(t *testing.T) {
	ev := func(d string) string { return `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + d + `"}` }
	url, js := pubServer(t)
	tests := []struct {
		name       string
		args       []string // after the URL flag
		stdin      string
		wantStatus int
		wantStored []string // cumulative: the stream is shared by the cases
		wantStdout string
		wantStderr string
	}{
		{
			name:       "all valid",
			args:       []string{"--tenant", "acme", "--thread", "t 1"},
			stdin:      ev("a") + "\n" + ev("b") + "\n",
			wantStatus: exitOK,
			wantStored: []string{ev("a"), ev("b")},
			wantStdout: "published 2 of 2 events to acme/t 1 (0 rejected, 0 failed)",
		},
		{
			name:       "one invalid",
			args:       []string{"--tenant", "acme", "--thread", "t 1", "--linger", "0"},
			stdin:      ev("c") + "\n" + `{"type":"NOPE"}` + "\n" + ev("d"),
			wantStatus: exitRejected,
			wantStored: []string{ev("a"), ev("b"), ev("c"), ev("d")},
			wantStdout: "published 2 of 3 events",
			wantStderr: "rejected: event 1: agent: invalid event: codec:",
		},
		{
			name:       "bad framing",
			args:       []string{"--tenant", "acme", "--thread", "t 1"},
			stdin:      ev("e") + "\n]",
			wantStatus: exitUsage,
			wantStored: []string{ev("a"), ev("b"), ev("c"), ev("d"), ev("e")},
			wantStderr: "bad stream framing",
		},
		{name: "missing thread", args: []string{"--tenant", "acme"}, wantStatus: exitUsage,
			wantStored: []string{ev("a"), ev("b"), ev("c"), ev("d"), ev("e")}, wantStderr: "--tenant and --thread are required"},
		{name: "bad tenant", args: []string{"--tenant", "ACME", "--thread", "t"}, wantStatus: exitUsage,
			wantStored: []string{ev("a"), ev("b"), ev("c"), ev("d"), ev("e")}, wantStderr: "invalid tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"publish", "--nats-url", url}, tt.args...)
			if got := run(args, strings.NewReader(tt.stdin), &stdout, &stderr); got != tt.wantStatus {
				t.Errorf("exit %d, want %d; stderr: %s", got, tt.wantStatus, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stdout %q (want %q), stderr %q (want %q)", stdout.String(), tt.wantStdout, stderr.String(), tt.wantStderr)
			}
			got := pubStored(t, js, "t 1")
			if strings.Join(got, "\n") != strings.Join(tt.wantStored, "\n") {
				t.Errorf("stored %q, want %q", got, tt.wantStored)
			}
		})
	}
}

func TestPublishCommandNoServer(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"publish", "--nats-url", "nats://127.0.0.1:1", "--tenant", "acme", "--thread", "t"}
	if got := run(args, strings.NewReader(""), &stdout, &stderr); got != exitUsage || !strings.Contains(stderr.String(), "connect to") {
		t.Errorf("exit %d, stderr %q; want %d and a connect error", got, stderr.String(), exitUsage)
	}
}

// TestPublishCommandToken: against a node's locked embedded server, --token
// with a publish token of the tenant stores the events; no token, a
// read-only token and another tenant's token store nothing.
func TestPublishCommandToken(t *testing.T) {
	key := []byte("publish-token-test-key-0123")
	cfg := nodeConfig{node.DefaultConfig(), ingestrole.DefaultConfig()}
	cfg.HTTP, cfg.NatsListen, cfg.DataDir, cfg.AuthKey = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), key
	cfg.Pipeline.Partitions = 2
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := node.Start(cfg.config())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	svc, err := n.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	js, err := jetstream.New(svc)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(tenant, scope string) string {
		tok, err := auth.Mint(key, auth.Claims{Tenant: tenant, Scope: scope, Expiry: time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ev := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`
	for _, tt := range []struct {
		name       string
		token      string
		wantStatus int
		wantStderr string
		wantStored int
	}{
		{"no token", "", exitUsage, "uthorization", 0},
		{"read-only token", mint("acme", auth.ScopeRead), exitUsage, "uthorization", 0},
		{"another tenant's token", mint("globex", auth.ScopeRead+" "+auth.ScopePublish), exitRejected, "Permissions Violation for Publish to \"agui.acme.tok.events\"", 0},
		{"publish token", mint("acme", auth.ScopeRead+" "+auth.ScopePublish), exitOK, "", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"publish", "--nats-url", n.NatsURL(), "--tenant", "acme", "--thread", "tok", "--timeout", "3s"}
			if tt.token != "" {
				args = append(args, "--token", tt.token)
			}
			if got := run(args, strings.NewReader(ev+"\n"), &stdout, &stderr); got != tt.wantStatus {
				t.Errorf("exit %d, want %d; stderr: %s", got, tt.wantStatus, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
			if got := len(pubStoredIn(t, js, cfg.Pipeline.Stream, "acme", "tok")); got != tt.wantStored {
				t.Errorf("%d events stored for acme/tok, want %d", got, tt.wantStored)
			}
		})
	}
}

// pubStoredIn returns the stored messages of tenant's thread in stream.
func pubStoredIn(t *testing.T, js jetstream.JetStream, stream, tenant, thread string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		if _, te, tok, _ := wire.ParseStoredSubject(m.Subject); te == tenant && tok == wire.EncodeThread(thread) {
			out = append(out, string(m.Data))
		}
	}
	return out
}
