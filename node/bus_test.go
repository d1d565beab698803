package node

import (
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
	waitFor(t, 20*time.Second, "/readyz", func() bool { c, _ := do(t, "GET", n.URL()+"/readyz", "", ""); return c == 200 })
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
