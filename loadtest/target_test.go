package main

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// A tiny run against a running Threadcast (--target, --nats-url): its bus
// admits agents only, so each tenant's simulated agents connect with a
// publish token of their tenant; the run still passes its check.
func TestTinyRunAgainstTarget(t *testing.T) {
	sys, key, err := startNode(2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	cfg := DefaultConfig()
	cfg.Target, cfg.NatsURL, cfg.AuthKey = sys.n.URL(), sys.n.NatsURL(), key
	cfg.Duration, cfg.Settle, cfg.JoinOver = 2*time.Second, 30*time.Second, 300*time.Millisecond
	cfg.Tenants, cfg.Threads, cfg.Agents, cfg.Rate, cfg.Subscribers = 2, 6, 2, 200, 10
	cfg.Seed = 7
	res, err := Run(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Check.Pass || res.EventsIn == 0 {
		t.Fatalf("check %+v, events in %d", res.Check, res.EventsIn)
	}
}
