package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// storageEnv is a bridge with a StorageWatch over a real embedded server
// whose store is dir, limited to maxStore bytes (0: the server's default).
type storageEnv struct {
	js    jetstream.JetStream
	watch *pipeline.StorageWatch
	env   *bridgeEnv
}

func startStorageEnv(t *testing.T, dir string, maxStore int64, wcfg pipeline.StorageConfig) *storageEnv {
	t.Helper()
	wcfg.Logger = slog.New(slog.DiscardHandler)
	watch := pipeline.NewStorageWatch(wcfg)
	scfg := natsembed.DefaultConfig()
	scfg.StoreDir, scfg.MaxFileStore = dir, maxStore
	scfg.OnWriteError = watch.ReportWriteError
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
	js, _ := jetstream.New(nc)
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
		t.Fatal(err)
	}
	pub, err := agent.New(nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = pub.Close(ctx) // events a full disk left unanswered are abandoned
	})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); watch.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	br, err := bridge.New(bridge.Config{Publisher: pub, Verify: bridgeVerify, Storage: watch})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/ingest/", br)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &storageEnv{js: js, watch: watch, env: &bridgeEnv{js: js, pub: pub, br: br, http: hs}}
}

// bigEvents returns a JSONL body of n events of about size bytes.
func bigEvents(n, size int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%d %s"}`+"\n", i, strings.Repeat("x", size))
	}
	return b.Bytes()
}

// TestBridgeStorageLimit fills JetStream's store to its limit (the server
// refuses with "insufficient resources", as on a store that has used its
// share of the disk): the bridge answers 507 with Retry-After and the
// cause, refuses the next requests at their entry while the refusal
// lasts, and takes writes again by itself once there is room.
func TestBridgeStorageLimit(t *testing.T) {
	se := startStorageEnv(t, t.TempDir(), 2<<20, pipeline.StorageConfig{RetryAfter: 2 * time.Second})
	body := bigEvents(16, 16<<10) // 256 KiB
	var status int
	var hdr http.Header
	var resp bridge.Response
	for i := 0; i < 20; i++ {
		if status, hdr, resp = se.env.post(t, "acme", "t-full", "", bytes.NewReader(body)); status != http.StatusOK {
			break
		}
	}
	if status != http.StatusInsufficientStorage || hdr.Get("Retry-After") == "" || !strings.Contains(resp.Error, "insufficient resources") {
		t.Fatalf("store full: %d %v %+v; want 507 with Retry-After naming insufficient resources", status, hdr, resp)
	}
	if resp.Accepted >= resp.Events {
		t.Errorf("507 says all %d events were stored", resp.Accepted)
	}

	// While the refusal lasts, requests are refused before their body.
	status, hdr, resp = se.env.post(t, "acme", "t-full", "", bytes.NewReader(body))
	if status != http.StatusInsufficientStorage || hdr.Get("Retry-After") == "" || resp.Events != 0 {
		t.Errorf("next request: %d %+v; want 507 before reading", status, resp)
	}
	if err := se.watch.Check(); !strings.Contains(fmt.Sprint(err), "insufficient resources") {
		t.Errorf("Check: %v", err)
	}

	// Room again (the log is purged): after Retry-After, writes go through.
	s, err := se.js.Stream(context.Background(), wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	bridgeWaitFor(t, 10*time.Second, "the refusal to lapse", func() bool { return se.watch.Check() == nil })
	if status, _, resp = se.env.post(t, "acme", "t-full", "", bytes.NewReader(body)); status != http.StatusOK || resp.Accepted != 16 {
		t.Fatalf("after room was made: %d %+v; want 200", status, resp)
	}
	if st := se.env.br.Stats(); st.StorageFull != 2 {
		t.Errorf("stats: %d requests counted as storage full, want 2", st.StorageFull)
	}
}

// TestBridgeDiskFull fills the file system of the store for real (a small
// tmpfs; it needs root to mount one) with a file that is not JetStream's,
// as another process or log would: the watch sees the free space under its
// headroom, the bridge refuses at once with 507 naming the free space
// (instead of publishes left unanswered for half a minute), and once the
// file is gone it takes writes again by itself.
func TestBridgeDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs; TestBridgeStorageLimit covers JetStream's own limit")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	se := startStorageEnv(t, dir, 0, pipeline.StorageConfig{Dir: dir, MinFree: 8 << 20, Every: 10 * time.Millisecond, RetryAfter: time.Second})
	body := bigEvents(16, 16<<10)
	if status, _, resp := se.env.post(t, "acme", "t-disk", "", bytes.NewReader(body)); status != http.StatusOK {
		t.Fatalf("before: %d %+v", status, resp)
	}
	// Leave 4 MiB free: under the 8 MiB headroom, enough for nothing to fail yet.
	filler := filepath.Join(dir, "filler")
	free := freeSpace(t, dir)
	if out, err := exec.Command("fallocate", "-l", strconv.FormatUint(free-4<<20, 10), filler).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v %s", err, out)
	}
	bridgeWaitFor(t, 10*time.Second, "the watch to see the disk full", func() bool { return se.watch.Check() != nil })
	status, hdr, resp := se.env.post(t, "acme", "t-disk", "", bytes.NewReader(body))
	if status != http.StatusInsufficientStorage || hdr.Get("Retry-After") != "1" || !strings.Contains(resp.Error, "bytes free") || resp.Events != 0 {
		t.Fatalf("disk full: %d %v %+v; want 507, Retry-After 1, the free space named, the body unread", status, hdr, resp)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	bridgeWaitFor(t, 10*time.Second, "the watch to see room", func() bool { return se.watch.Check() == nil })
	if status, _, resp := se.env.post(t, "acme", "t-disk", "", bytes.NewReader(body)); status != http.StatusOK || resp.Accepted != 16 {
		t.Fatalf("after: %d %+v; want 200", status, resp)
	}
	if n := se.env.storedCount(t); n != 32 {
		t.Errorf("%d events stored, want 32", n)
	}
}

func freeSpace(t *testing.T, dir string) uint64 {
	t.Helper()
	out, err := exec.Command("df", "-B1", "--output=avail", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBridgeDiskFullInFlight fills the disk completely (ENOSPC: the server
// leaves the publish unanswered) while a request is sending its body: the
// request stops waiting for its acks when the watch sees the disk full and
// answers 507 counting the events stored before, instead of hanging for
// the publisher's retries; as nats-server then writes that stream only
// after a restart, the watch keeps refusing, saying so, once the disk has
// room again. (It needs root for its tmpfs.)
func TestBridgeDiskFullInFlight(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs; TestBridgeStorageLimit covers JetStream's own limit")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	se := startStorageEnv(t, dir, 0, pipeline.StorageConfig{Dir: dir, MinFree: 8 << 20, Every: 10 * time.Millisecond, RetryAfter: time.Second})
	pr, pw := io.Pipe()
	type answer struct {
		status int
		resp   bridge.Response
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, se.env.http.URL+"/v1/ingest/acme/t-inflight", pr)
		req.Header.Set("Authorization", bridgeToken)
		res, err := se.env.http.Client().Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var br bridge.Response
		err = json.NewDecoder(res.Body).Decode(&br)
		got <- answer{res.StatusCode, br, err}
	}()
	first := bigEvents(8, 16<<10)
	if _, err := pw.Write(first); err != nil {
		t.Fatal(err)
	}
	bridgeWaitFor(t, 10*time.Second, "the first events stored", func() bool { return se.env.storedCount(t) == 8 })
	filler := filepath.Join(dir, "filler")
	out, _ := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=64").CombinedOutput() // to ENOSPC
	if !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd did not fill the disk: %s", out)
	}
	go func() {
		_, _ = pw.Write(bigEvents(8, 16<<10))
		_ = pw.Close()
	}()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.status != http.StatusInsufficientStorage || a.resp.Accepted != 8 || !strings.Contains(a.resp.Error, "storage full") {
		t.Fatalf("%d %+v; want 507 with the 8 stored events counted and the cause named", a.status, a.resp)
	}
	// The watch may have refused the second half of the body before any of
	// it reached the server; a publish straight to the stream makes the
	// server meet ENOSPC either way (128 KiB: more than a partly written
	// page of its block file can take).
	subj, err := wire.EventSubject("acme", "t-inflight")
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, perr := se.env.js.Publish(pctx, subj, bigEvents(8, 16<<10))
	pcancel()
	if perr == nil {
		t.Fatal("a publish to the full disk was acked")
	}
	// The server hit ENOSPC: it will not write the stream again before a
	// restart, and the watch keeps saying so after the disk has room.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	se.watch.Poll()
	if err := se.watch.Check(); err == nil || !strings.Contains(err.Error(), "critical write error") {
		t.Fatalf("after ENOSPC and room again: Check %v; want the server's critical write error", err)
	}
	status, _, resp := se.env.post(t, "acme", "t-inflight", "", bytes.NewReader(first))
	if status != http.StatusInsufficientStorage || !strings.Contains(resp.Error, "restart") {
		t.Errorf("after ENOSPC: %d %+v; want 507 saying a restart is needed", status, resp)
	}
}
