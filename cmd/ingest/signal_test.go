//go:build unix

package main

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
)

// A second signal during the shutdown kills the process at once, as
// README says: here the shutdown waits for a bridge request whose body
// never comes, up to --drain, and the second SIGTERM ends it long before.
func TestSecondSignalKills(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ingest")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	key := "test-key-0123456789abcdef"
	cmd := exec.Command(bin, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", addr,
		"--partitions", "4", "--auth-key", key, "--log-level", "error", "--drain", "60s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}

	tok, err := auth.Mint([]byte(key), auth.Claims{Tenant: "acme", Scope: "publish", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ev := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n"
	fmt.Fprintf(c, "POST /v1/ingest/acme/t HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/x-ndjson\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", tok, len(ev), ev) // and no more: the body never ends
	time.Sleep(time.Second) // for the request to reach the bridge

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatalf("the shutdown did not wait for the request in flight: %v", cmd.ProcessState)
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("exited %v, want killed by SIGTERM", cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after a second SIGTERM (the shutdown waits up to --drain 60s)")
	}
}
