package ingestrole

import (
	"context"
	"fmt"
	"time"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/demo"
)

// demoConn is one demo tenant's connection and publisher.
type demoConn struct {
	tenant string
	close  func() // drains the connection and waits for it
	pub    *agent.Publisher
}

// DemoTokenTTL is the lifetime of the token a demo agent's connection
// presents; each (re)connect presents a fresh one, so a connection the
// server closes at its token's expiry reconnects at once.
const DemoTokenTTL = 24 * time.Hour

// StartAgents starts the demo agents (when Demo is on), one connection and
// publisher per tenant.
func (s *Side) StartAgents() error {
	if !s.cfg.Demo {
		return nil
	}
	dc := s.cfg.DemoConfig
	tenants := dc.Tenants
	if len(tenants) == 0 {
		tenants = demo.DefaultTenants()
	}
	// Each tenant's agents connect as agents do: with a publish token of
	// their tenant, authorized by the bus like any other agent's.
	pubs := make(map[string]demo.Publisher, len(tenants))
	for _, t := range tenants {
		if _, ok := pubs[t]; ok {
			continue
		}
		opts, err := agent.TokenAuth(t, func() string { return s.demoToken(t) })
		if err != nil {
			return fmt.Errorf("node: demo tenant: %w", err)
		}
		nc, closeConn, err := s.h.Dial("threadcast-demo-"+t, opts...)
		if err != nil {
			return err
		}
		d := demoConn{tenant: t, close: closeConn}
		s.demoConns = append(s.demoConns, d)
		if d.pub, err = agent.New(nc, s.publisherConfig()); err != nil {
			return fmt.Errorf("node: demo publisher: %w", err)
		}
		s.demoConns[len(s.demoConns)-1] = d
		pubs[t] = demo.AgentPublisher(d.pub)
	}
	pub := demo.PublisherFunc(func(ctx context.Context, tenant, thread string, event []byte) error {
		p, ok := pubs[tenant]
		if !ok {
			return fmt.Errorf("node: demo tenant %q has no connection", tenant)
		}
		return p.Publish(ctx, tenant, thread, event)
	})
	if dc.OnError == nil {
		dc.OnError = func(tenant, thread string, err error) {
			s.log.Warn("demo agent abandoned a thread", "tenant", tenant, "thread", thread, "err", err)
		}
	}
	s.demo.Run(func(ctx context.Context) error {
		var err error
		s.demoStats, err = demo.Run(ctx, pub, dc)
		return err
	}, func(err error) {
		// Demo agents end on their own only with ThreadsPerAgent: only an
		// error is a failure.
		if err != nil {
			s.h.Fail("demo", err)
		}
	})
	agents := dc.Agents
	if agents == 0 {
		agents = 2 * max(len(dc.Tenants), len(demo.DefaultTenants())) // demo.Run's default
	}
	s.log.Info("demo agents started", "tenants", dc.Tenants, "agents", agents, "rate", dc.Rate, "seed", dc.Seed)
	return nil
}

// DemoStats returns what the demo agents did; valid after Stop.
func (s *Side) DemoStats() demo.Stats {
	if !s.demo.Started() {
		return demo.Stats{}
	}
	select {
	case <-s.demo.Done():
		return s.demoStats
	default:
		return demo.Stats{}
	}
}

// demoToken mints the token a demo agent of tenant connects with.
func (s *Side) demoToken(tenant string) string {
	c := auth.Claims{Tenant: tenant, Scope: auth.ScopePublish, Expiry: time.Now().Add(DemoTokenTTL).Unix()}
	if aud := s.node.Tokens.Audience; aud != "" {
		c.Audience = auth.Audience{aud} // the verifier requires it
	}
	tok, err := auth.Mint(s.node.AuthKey, c)
	if err != nil {
		s.log.Error("demo token", "tenant", tenant, "err", err)
	}
	return tok
}
