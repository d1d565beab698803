package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// run performs one chaos run and returns its report (nil if the cluster
// could not start). Everything it starts is stopped and waited for before
// it returns, also when ctx ends early.
func run(ctx context.Context, cfg Config, logw io.Writer) (*Report, error) {
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "chaos %6.1fs: %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	dir := cfg.Work
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "threadcast-chaos-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	keep := true // the working directory stays unless the run passes
	defer func() {
		if !keep && !cfg.Keep && cfg.Work == "" {
			_ = os.RemoveAll(dir)
		} else {
			logf("logs and stores kept in %s", dir)
		}
	}()
	c, err := newCluster(cfg, dir)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if err := c.start(ctx, logf); err != nil {
		return nil, err
	}

	rep := &Report{Config: cfg, Start: start, Restarts: map[string]int{}}
	mon := &monitor{c: c, interval: 250 * time.Millisecond}
	monCtx, stopMon := context.WithCancel(context.Background())
	var monWG sync.WaitGroup
	monWG.Go(func() { mon.run(monCtx) })
	stopMonitor := sync.OnceFunc(func() { stopMon(); monWG.Wait() })
	defer stopMonitor()

	loadOut := filepath.Join(dir, "loadtest")
	lt := &proc{
		name: "loadtest", kind: "loadtest", bin: filepath.Join(cfg.BinDir, "loadtest"),
		args: []string{
			"--target", c.fanoutURLs(), "--nats-url", c.urls(2), "--auth-key", c.authKey,
			"--duration", cfg.Duration.String(), "--settle", cfg.Settle.String(),
			"--tenants", strconv.Itoa(cfg.Tenants), "--threads", strconv.Itoa(cfg.Threads),
			"--agents", strconv.Itoa(cfg.Agents), "--subscribers", strconv.Itoa(cfg.Subscribers),
			"--rate", strconv.FormatFloat(cfg.Rate, 'f', -1, 64), "--hot-threads", "4",
			"--join-over", "3s", "--publish-retries", strconv.Itoa(cfg.PublishRetries), "--seed", strconv.FormatUint(cfg.Seed, 10), "--out", loadOut,
		},
		logPath: filepath.Join(dir, "loadtest.log"),
	}
	if err := lt.start(); err != nil {
		return nil, err
	}
	defer lt.terminate(10 * time.Second)
	loadStart := time.Now()
	loadEnd := loadStart.Add(cfg.Duration)
	logf("load test started: %v of load, faults every %v–%v", cfg.Duration, cfg.FaultMin, cfg.FaultMax)

	x := newChaos(c, mon, cfg.Seed, logf)
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var chaosWG sync.WaitGroup
	// The last fault starts at least 8 s before the load ends, so that
	// its recovery is measured under load.
	chaosWG.Go(func() { x.run(chaosCtx, loadEnd, 8*time.Second) })

	ltDone := make(chan struct{})
	var ltWG sync.WaitGroup
	ltWG.Go(func() {
		for lt.running() {
			sleep(ctx, 200*time.Millisecond)
			if ctx.Err() != nil {
				return
			}
		}
		close(ltDone)
	})
	select {
	case <-ltDone:
	case <-ctx.Done():
	}
	stopChaos()
	chaosWG.Wait()
	ltWG.Wait()
	rep.Faults = x.faults
	if ctx.Err() != nil {
		return rep, fmt.Errorf("chaos: interrupted: %w", ctx.Err())
	}
	var ee *exec.ExitError
	if err := lt.exitErr(); errors.As(err, &ee) {
		rep.LoadExit = ee.ExitCode()
	} else if err != nil {
		rep.LoadExit = -1
	}
	logf("load test exited %d", rep.LoadExit)
	if rep.Load, err = readLoadReport(filepath.Join(loadOut, "report.json")); err != nil {
		rep.Verdict = []string{err.Error(), "load test log tail:\n" + lt.logTail(4000)}
		return rep, err
	}
	// Everything is up again (the last fault was undone before the load
	// ended); the stream check reads what the cluster stored.
	if !mon.waitHealthy(ctx, 60*time.Second) {
		logf("not healthy 60 s after the load test ended; checking anyway")
	}
	if rep.Stream, err = checkStream(ctx, c, 30*time.Second, logf); err != nil {
		logf("stream check: %v", err)
	}
	stopMonitor()
	bins := rep.Load.deliveries()
	for _, f := range rep.Faults {
		h, waited, ok := mon.healthySince(f.Undone)
		f.Waited = waited
		recovery(f, h, ok, rep.Load.Start, bins, rep.Load.Start.Add(cfg.Duration))
	}
	rep.ByKind = kindStats(rep.Faults)
	rep.Exits = mon.exits
	for _, p := range c.procs() {
		rep.Restarts[p.name] = p.starts
	}
	rep.verdict()
	rep.Wall = time.Since(start).Seconds()
	keep = !rep.Pass
	return rep, err
}
