package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/busauth"
	"github.com/threadcast/threadcast/natsembed"
)

func TestParseConfigBusAuth(t *testing.T) {
	none := func(string) string { return "" }
	for _, tt := range []struct {
		give    []string
		wantErr string
	}{
		{[]string{"--nats-url", "nats://n:4222", "--nats-creds", "a.creds", "--nats-nkey", "b.nk"}, "two identities"},
		{[]string{"--nats-url", "nats://n:4222", "--nats-callout-seed", "c.nk"}, "needs --auth-key"},
		{[]string{"--nats-nkey", "b.nk"}, "are for --nats-url"},
		{[]string{"--auth-key", "test-key-0123456789abcdef", "--nats-callout-seed", "c.nk"}, "are for --nats-url"},
	} {
		if _, err := parseConfig(tt.give, none); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: %v, want %q", tt.give, err, tt.wantErr)
		}
	}
}

// TestRunCallout: cmd/ingest joined to a locked server with --nats-nkey
// runs the auth callout with --nats-callout-seed: an agent with a publish
// token of its tenant publishes and its events are reduced; one without a
// token is refused.
func TestRunCallout(t *testing.T) {
	dir := t.TempDir()
	user, _ := nkeys.CreateUser()
	issuer, _ := nkeys.CreateAccount()
	write := func(name string, kp nkeys.KeyPair) (string, string) {
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(string(seed)+"\n"+pub+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p, pub
	}
	userFile, userPub := write("service.nk", user)
	issuerFile, issuerPub := write("callout.nk", issuer)
	sc := natsembed.DefaultConfig()
	sc.StoreDir = t.TempDir()
	sc.Auth = &natsembed.Auth{Services: []string{userPub}, CalloutIssuer: issuerPub, AgentAccount: busauth.AgentAccount}
	srv, err := natsembed.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()

	key := "test-key-0123456789abcdef"
	cfg, err := parseConfig([]string{
		"--nats-url", srv.ClientURL(), "--nats-nkey", userFile, "--nats-callout-seed", issuerFile,
		"--http", "127.0.0.1:0", "--partitions", "2", "--auth-key", key, "--log-level", "error",
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(cfg, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr := "http://" + <-a.httpAddr
	deadline := time.Now().Add(20 * time.Second)
	for code, _, _ := get(addr + "/readyz"); code != 200; code, _, _ = get(addr + "/readyz") {
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without a token connected")
	}
	tok, err := auth.Mint([]byte(key), auth.Claims{Tenant: "acme", Scope: auth.ScopePublish, Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := agent.TokenAuth("acme", func() string { return tok })
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("agent with a publish token: %v", err)
	}
	defer nc.Close()
	pub, err := agent.New(nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	var futs []*agent.Future
	for _, e := range []string{
		`{"type":"RUN_STARTED","threadId":"th","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"hello"}`,
		`{"type":"RUN_FINISHED","threadId":"th","runId":"r1"}`,
	} {
		f, err := pub.Publish(pctx, "acme", "th", []byte(e))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	if err := pub.Close(pctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range futs {
		if _, err := f.Result(); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		code, body, _ := get(addr + "/metrics")
		if code == 200 && strings.Contains(body, `threadcast_ingest_events_total{type="RUN_FINISHED"} 1`) &&
			strings.Contains(body, `threadcast_bus_auth_total{result="ok"} 1`) && strings.Contains(body, `threadcast_bus_auth_total{result="no_token"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events not reduced or callout answers not counted: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunBadKeys: an unreadable --nats-nkey, or a --nats-callout-seed that
// is not an account seed, is a start-up error naming it.
func TestRunBadKeys(t *testing.T) {
	dir := t.TempDir()
	user, _ := nkeys.CreateUser()
	seed, _ := user.Seed()
	userFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(userFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := natsembed.Start(func() natsembed.Config {
		sc := natsembed.DefaultConfig()
		sc.StoreDir = t.TempDir()
		return sc
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-nkey", filepath.Join(dir, "missing.nk")}, "--nats-nkey"},
		{[]string{"--auth-key", "test-key-0123456789abcdef", "--nats-callout-seed", userFile}, "not an account seed"},
	} {
		cfg, err := parseConfig(append([]string{"--nats-url", srv.ClientURL(), "--http", "127.0.0.1:0", "--partitions", "2", "--log-level", "error"}, tt.args...), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		a := newApp(cfg, io.Discard) // its address channels are buffered: nothing need read them
		if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: Run: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestRunEmbeddedLocked: with --auth-key the embedded server runs the
// callout in process: an agent with a publish token of its tenant is acked.
func TestRunEmbeddedLocked(t *testing.T) {
	key := "test-key-0123456789abcdef"
	cfg, err := parseConfig([]string{
		"--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--partitions", "2", "--auth-key", key, "--log-level", "error",
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(cfg, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr, url := "http://"+<-a.httpAddr, <-a.natsURL
	deadline := time.Now().Add(20 * time.Second)
	for code, _, _ := get(addr + "/readyz"); code != 200; code, _, _ = get(addr + "/readyz") {
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok, err := auth.Mint([]byte(key), auth.Claims{Tenant: "acme", Scope: auth.ScopePublish, Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := agent.TokenAuth("acme", func() string { return tok })
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("agent with a publish token: %v", err)
	}
	defer nc.Close()
	ack, err := nc.Request("agui.acme.th.events", []byte(`{"type":"RUN_STARTED","threadId":"th","runId":"r1"}`), 5*time.Second)
	if err != nil || !strings.Contains(string(ack.Data), `"seq"`) {
		t.Fatalf("ack: %v %v", ack, err)
	}
}
