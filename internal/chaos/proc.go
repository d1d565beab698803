package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one OS process of the cluster: a NATS server, an ingest, a
// fanout or the load test. It runs in a process group of its own, so that
// signals reach it and whatever it started, and it dies with the harness
// (Pdeathsig). Its output is appended to its log file across restarts.
type proc struct {
	name, kind string
	bin        string
	args       []string
	logPath    string
	// probe is the URL whose 200 means ready ("" for the load test).
	probe string

	mu      sync.Mutex
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{} // closed when the current process has exited
	waitErr error         // read after done is closed
	// down is set while the harness keeps it down on purpose (killed and
	// not yet restarted): the supervisor leaves it alone.
	down     bool
	paused   bool
	starts   int
	failures []string // unexpected exits, with their log tails
}

// start starts the process; it must not be running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== chaos: start %s at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Only what the command documents: flags, and no THREADCAST_* variable
	// of the caller.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.log, p.done, p.down, p.paused = cmd, f, done, false, false
	p.starts++
	// The waiter is owned by the process: it ends when the process does,
	// and every stop path waits for done.
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		f.Close()
		close(done)
	}()
	return nil
}

// running reports whether the current process has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// kill sends SIGKILL to the group and waits for the exit; the process is
// then down until start.
func (p *proc) kill() {
	p.mu.Lock()
	p.down = true
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return
	}
	_ = p.signal(syscall.SIGKILL)
	<-done
}

func (p *proc) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	_ = p.signal(syscall.SIGSTOP)
}

func (p *proc) resume() {
	_ = p.signal(syscall.SIGCONT)
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// terminate stops the process: SIGCONT (it may be stopped), SIGTERM, and
// SIGKILL to the group after grace; it returns once the process is gone.
func (p *proc) terminate(grace time.Duration) {
	p.mu.Lock()
	p.down = true
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = p.signal(syscall.SIGKILL)
		<-done
	}
	// Whatever the group still holds (nothing, normally) goes too.
	_ = p.signal(syscall.SIGKILL)
}

// exitErr returns the last exit's error (after the process exited).
func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// ready reports whether the probe URL answers 200 within a second.
func (p *proc) ready(ctx context.Context, client *http.Client) bool {
	if p.probe == "" {
		return p.running()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.probe, nil)
	if err != nil {
		return false
	}
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode == http.StatusOK
}

// logTail returns the last n bytes of the process's log file.
func (p *proc) logTail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(b, off)
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
