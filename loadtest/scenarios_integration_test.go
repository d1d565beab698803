//go:build integration

package main

import (
	"context"
	"testing"
	"time"
)

// Every scenario, short and small, passes its own check (run with
// -tags integration; about a minute in all).
func TestScenariosPassTheirCheck(t *testing.T) {
	for _, name := range scenarioNames() {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Scenario = name
			cfg.Duration, cfg.Settle, cfg.JoinOver = 8*time.Second, 60*time.Second, time.Second
			cfg.Tenants, cfg.Threads, cfg.Agents, cfg.Rate, cfg.Subscribers = 2, 30, 6, 600, 120
			cfg.Seed = 7
			res, err := Run(context.Background(), cfg, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Check.Pass {
				t.Fatalf("check failed: %+v", res.Check)
			}
			switch name {
			case "reconnect-storm":
				if res.Reconnects == 0 {
					t.Error("the storm reconnected nobody")
				}
			case "ingest-restart":
				if res.Config.Embedded != "parts" {
					t.Errorf("ran on %q, want the parts assembly", res.Config.Embedded)
				}
			}
		})
	}
}
