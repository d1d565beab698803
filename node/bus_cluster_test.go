//go:build buscluster

package node_test

// TestBusMatrixCluster needs a nats-server binary: THREADCAST_NATS_SERVER,
// else nats-server on PATH. scripts/test.sh installs the pinned version:
//
//	GOBIN=$(mktemp -d) go install github.com/nats-io/nats-server/v2@v2.15.2

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/nats-io/nuid"
	"github.com/threadcast/threadcast/internal/testsupport"
)

func natsServerBinary(t *testing.T) string {
	if p := os.Getenv("THREADCAST_NATS_SERVER"); p != "" {
		return p
	}
	p, err := exec.LookPath("nats-server")
	if err != nil {
		t.Fatal("no nats-server: set THREADCAST_NATS_SERVER or install it (GOBIN=... go install github.com/nats-io/nats-server/v2@v2.15.2)")
	}
	return p
}

// docsServerConfig returns the server configuration docs/production.md
// gives (the block that starts with "# threadcast-nats.conf").
func docsServerConfig(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "docs", "production.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "# threadcast-nats.conf\n")
	if !ok {
		t.Fatal("docs/production.md has no block starting with # threadcast-nats.conf")
	}
	conf, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/production.md: the server configuration block does not end")
	}
	return conf
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// writeKey writes kp as `nk -gen ... -pubout` does: the seed, then the
// public key.
func writeKey(t *testing.T, path string, kp nkeys.KeyPair) string {
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	if err := os.WriteFile(path, []byte(string(seed)+"\n"+pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return pub
}

// replaceAll replaces old with repl in s and fails when old is absent, so
// that the test notices the docs changing under it.
func replaceAll(t *testing.T, s, old, repl string) string {
	if !strings.Contains(s, old) {
		t.Fatalf("docs/production.md's server configuration no longer contains %q", old)
	}
	return strings.ReplaceAll(s, old, repl)
}

// TestBusMatrixCluster runs the cross-tenant matrix against three
// nats-server processes configured from docs/production.md, with a node
// joined to them as the docs say (--nats-nkey, --nats-callout-seed).
func TestBusMatrixCluster(t *testing.T) {
	bin := natsServerBinary(t)
	dir := t.TempDir()
	svcKey, _ := nkeys.CreateUser()
	calloutKey, _ := nkeys.CreateAccount()
	svcFile, calloutFile := filepath.Join(dir, "service.nk"), filepath.Join(dir, "callout.nk")
	svcPub := writeKey(t, svcFile, svcKey)
	issuer := writeKey(t, calloutFile, calloutKey)
	routePass := nuid.Next()

	base := docsServerConfig(t)
	var client, route [3]int
	for i := range 3 {
		client[i], route[i] = freePort(t), freePort(t)
	}
	var urls []string
	for i := range 3 {
		conf := base
		conf = replaceAll(t, conf, "server_name: n1", fmt.Sprintf("server_name: n%d", i+1))
		conf = replaceAll(t, conf, "listen: 0.0.0.0:4222", "listen: 127.0.0.1:"+strconv.Itoa(client[i]))
		conf = replaceAll(t, conf, "listen: 0.0.0.0:6222", "listen: 127.0.0.1:"+strconv.Itoa(route[i]))
		for j := range 3 {
			conf = replaceAll(t, conf, fmt.Sprintf("@n%d:6222", j+1), "@127.0.0.1:"+strconv.Itoa(route[j]))
		}
		conf = replaceAll(t, conf, "<store_dir>", filepath.Join(dir, fmt.Sprintf("js%d", i+1)))
		conf = replaceAll(t, conf, "<service_nkey>", svcPub)
		conf = replaceAll(t, conf, "<callout_issuer>", issuer)
		conf = replaceAll(t, conf, "<route_password>", routePass)
		file := filepath.Join(dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", file)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			_ = logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("n%d log (tail):\n%s", i+1, tail(string(b), 3000))
			}
		})
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(client[i]))
	}

	// The cluster is up when JetStream answers on each server.
	opt, err := nats.NkeyOptionFromSeed(svcFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		testsupport.WaitFor(t, 60*time.Second, "JetStream on "+u, func() bool {
			nc, err := nats.Connect(u, opt, nats.MaxReconnects(0))
			if err != nil {
				return false
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return false
			}
			_, err = js.AccountInfo(t.Context())
			return err == nil
		})
	}

	cfg := testConfig(t)
	cfg.NatsURL = strings.Join(urls, ",")
	cfg.NatsNkey, cfg.CalloutSeed = svcFile, calloutFile
	cfg.Pipeline.Replicas = 3
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}()
	testsupport.WaitFor(t, 60*time.Second, "/readyz", func() bool { c, _ := do(t, "GET", n.URL()+"/readyz", "", ""); return c == 200 })
	svc, err := n.Connect("matrix-control")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	// Agents and attackers dial the third server; the callout may be
	// connected to any of them (the request travels the routes).
	runBusMatrix(t, busEnv{natsURL: urls[2], httpURL: n.URL(), key: cfg.AuthKey, svc: svc, cfg: cfg.Pipeline})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
