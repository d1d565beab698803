package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
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

// Two fanout URLs, the first of which refuses connections (a node that is
// down): the subscribers dealt to it move to the other one, the REST views
// are read from the one that answers, and the run still passes its check.
func TestTinyRunAgainstTwoTargetsOneDown(t *testing.T) {
	sys, key, err := startNode(2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more: connections are refused
	cfg := DefaultConfig()
	cfg.Target, cfg.NatsURL, cfg.AuthKey = down+","+sys.n.URL(), sys.n.NatsURL()+","+sys.n.NatsURL(), key
	cfg.Duration, cfg.Settle, cfg.JoinOver = 2*time.Second, 30*time.Second, 300*time.Millisecond
	cfg.Tenants, cfg.Threads, cfg.Agents, cfg.Rate, cfg.Subscribers = 2, 6, 2, 200, 10
	cfg.Seed = 7
	res, err := Run(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Check.Pass || res.EventsIn == 0 || res.Check.SubsChecked != cfg.Subscribers {
		t.Fatalf("check %+v, events in %d", res.Check, res.EventsIn)
	}
	// Half the subscribers started on the node that is down.
	if res.Errors < uint64(cfg.Subscribers/2) {
		t.Fatalf("%d connection errors, want at least %d (the subscribers dealt to the node that is down)", res.Errors, cfg.Subscribers/2)
	}
}

func TestSplitURLs(t *testing.T) {
	if got := splitURLs(" http://a:1, ,http://b:2,"); len(got) != 2 || got[0] != "http://a:1" || got[1] != "http://b:2" {
		t.Fatalf("splitURLs = %q", got)
	}
	c := DefaultConfig()
	c.Target, c.NatsURL, c.AuthKey = "http://127.0.0.1:1,http://10.0.0.1:2", "nats://127.0.0.1:4222", []byte("k")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "10.0.0.1 is not a loopback") {
		t.Fatalf("Validate = %v, want the non-loopback second target refused", err)
	}
}
