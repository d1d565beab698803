package node_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// TestBusMatrixEmbedded runs the cross-tenant matrix (busmatrix_test.go)
// against the embedded default: a node with its own locked NATS server.
func TestBusMatrixEmbedded(t *testing.T) {
	cfg := testConfig(t)
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}()
	testsupport.WaitFor(t, 20*time.Second, "/readyz", func() bool { c, _ := do(t, "GET", n.URL()+"/readyz", "", ""); return c == 200 })
	svc, err := n.Connect("matrix-control")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	runBusMatrix(t, busEnv{natsURL: n.NatsURL(), httpURL: n.URL(), key: cfg.AuthKey, svc: svc, cfg: cfg.Pipeline})

	// The callout counted each kind of refusal the matrix made, and no
	// result outside its bounded set.
	_, metrics := do(t, "GET", n.URL()+"/metrics", "", "")
	for _, r := range []string{"ok", "no_token", "malformed", "signature", "expired", "scope"} {
		re := regexp.MustCompile(`threadcast_bus_auth_total\{result="` + r + `"\} ([0-9]+)`)
		if m := re.FindStringSubmatch(metrics); m == nil || m[1] == "0" {
			t.Errorf("threadcast_bus_auth_total{result=%q}: %v", r, m)
		}
	}
}

// TestEmbeddedNoAnonymous: the embedded server refuses a client without
// credentials, and one that guesses the service's user name.
func TestEmbeddedNoAnonymous(t *testing.T) {
	n, err := Start(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("threadcast", "")}, {nats.Token("")}} {
		nc, err := nats.Connect(n.NatsURL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("anonymous client with %d options connected", len(opts))
		}
	}
}

// TestBusConfigErrors: the NATS identity and callout settings that cannot
// work are start-up errors naming what is wrong.
func TestBusConfigErrors(t *testing.T) {
	dir := t.TempDir()
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	userFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(userFile, userSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"creds and nkey", func(c *Config) { c.NatsURL, c.NatsCreds, c.NatsNkey = "nats://127.0.0.1:1", "a.creds", userFile }, "two identities"},
		{"nkey without NatsURL", func(c *Config) { c.NatsNkey = userFile }, "external NATS"},
		{"callout seed without NatsURL", func(c *Config) { c.CalloutSeed = userFile }, "external NATS"},
		{"callout seed missing", func(c *Config) { c.NatsURL, c.CalloutSeed = "nats://127.0.0.1:1", filepath.Join(dir, "none") }, "issuer seed"},
		{"callout seed of a user", func(c *Config) { c.NatsURL, c.CalloutSeed = "nats://127.0.0.1:1", userFile }, "not an account seed"},
		{"nkey seed missing", func(c *Config) { c.NatsURL, c.NatsNkey = "nats://127.0.0.1:1", filepath.Join(dir, "none") }, "nkey seed"},
	} {
		cfg := testConfig(t)
		tt.edit(&cfg)
		n, err := Start(cfg)
		if err == nil {
			_ = n.Stop()
			t.Errorf("%s: started", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
