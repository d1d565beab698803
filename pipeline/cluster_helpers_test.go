//go:build cluster

package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildIngest compiles cmd/ingest once per test into a temporary directory,
// so the instance the test kills is the real command in its own process:
// SIGKILL then means what it means in production (no deferred drain, no
// lease release, no last ack, sockets closed by the kernel). Under -race the
// command is built with -race too, and startIngestProc fails the test on a
// race report in its stderr.
func buildIngest(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		// go test does not always put go on PATH; the toolchain that built
		// this test binary has it in its GOROOT.
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "ingest")
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, "github.com/threadcast/threadcast/cmd/ingest")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build cmd/ingest: %v\n%s", err, out.String())
	}
	t.Logf("built cmd/ingest (%v) in %v", args[3:], time.Since(t0))
	return bin
}

// raceEnabled reports whether this test binary was built with -race (its
// build settings say so; there is no other way without a tagged file).
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// logTail keeps the last max bytes written to it (a subprocess's stderr), so
// a long run cannot grow it without bound; safe for concurrent use.
type logTail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - l.max; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// ingestProc is one cmd/ingest process in lease mode against the cluster.
type ingestProc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	http   string // base URL of /readyz and /metrics
	stderr *logTail
	done   chan struct{} // closed when the process has exited (waitErr set)
	// waitErr is cmd.Wait's result; read only after done is closed.
	waitErr error
}

// startIngestProc starts bin as a lease-mode ingest instance named name,
// configured like clusterConfig (the flags spell the same values), against
// every server of c (the command shuffles the URL list itself). It is killed
// with SIGKILL in t.Cleanup if still running; its stderr (JSON log) goes to
// the test log if the test failed, or always with CLUSTER_LOG set.
func startIngestProc(t *testing.T, bin string, c *natsCluster, first int, name string) *ingestProc {
	t.Helper()
	cfg := clusterConfig()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{
		"--nats-url", c.urls(first),
		"--partition-mode", "lease",
		"--lease-holder", name,
		"--lease-ttl", clusterTTL.String(),
		"--partitions", strconv.Itoa(cfg.Partitions),
		"--replicas", strconv.Itoa(cfg.Replicas),
		"--checkpoint-every", strconv.Itoa(cfg.CheckpointEvery),
		"--checkpoint-interval", cfg.CheckpointInterval.String(),
		"--ack-wait", cfg.AckWait.String(),
		"--drain", "5s",
		"--http", httpAddr,
		"--log-level", "info",
	}
	p := &ingestProc{t: t, name: name, http: "http://" + httpAddr, stderr: &logTail{max: 64 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	// Only what the command documents: flags, plus a clean environment so
	// that no THREADCAST_* variable of the caller changes the setup.
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var w io.Writer = p.stderr
	if os.Getenv("CLUSTER_LOG") != "" {
		w = io.MultiWriter(p.stderr, prefixWriter(os.Stderr, name+": "))
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		// A race detected in the child is printed when found; the child
		// never exits on its own here (SIGKILL), so its exit code can't tell.
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("%s: the race detector reported a data race", name)
		}
		if t.Failed() || os.Getenv("CLUSTER_LOG") != "" {
			t.Logf("%s (pid %d) exited: %v; stderr (last %d KiB):\n%s", name, p.cmd.Process.Pid, p.waitErr, p.stderr.max>>10, p.stderr.String())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone; idempotent.
func (p *ingestProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		select {
		case <-p.done: // exited between the check and the signal
			return
		default:
			p.t.Errorf("SIGKILL %s: %v", p.name, err)
		}
	}
	<-p.done
}

// exited reports an error if the process has ended (it never should on its
// own while the test runs).
func (p *ingestProc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.waitErr, p.stderr.String())
	default:
		return nil
	}
}

// ready reports whether /readyz answers 200 (connected, every held
// partition's consumer bound, lag under the threshold).
func (p *ingestProc) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.http+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// held returns how many partitions the process says it holds: the
// threadcast_ingest_leases_held gauge of its /metrics.
func (p *ingestProc) held() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.http+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	const metric = "threadcast_ingest_leases_held "
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), metric); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %q in /metrics", p.name, strings.TrimSpace(metric))
}

// prefixWriter prefixes every write (log lines of a subprocess) with prefix.
func prefixWriter(w io.Writer, prefix string) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		var out []byte
		for line := range bytes.Lines(b) {
			out = append(append(out, prefix...), line...)
		}
		if _, err := w.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
