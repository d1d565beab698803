package pipeline

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// RetainedCounter keeps, for each tenant with an events-retained quota that
// a door has asked about, the count of its messages in the event log, and
// answers whether the tenant is over its quota: the bridge refuses such a
// tenant's requests (BridgeConfig.Retained) and the ingest sheds its events
// (Config.Retained).
//
// How the count is kept: every Every, Run asks the stream for its messages
// on aguip.*.<tenant>.* (JetStream stream info with a subject filter: the
// server's per-subject counts, summed), for each tenant Check has seen. So
// the count is of messages (a batch is one), as of the last poll: a tenant
// can overshoot its quota by what it stores in one interval, and is let in
// again at the first poll after retention (MaxAge, MaxBytes) has removed
// enough. A tenant Check has not seen yet is not over quota until the poll
// after its first Check. The tenants tracked are bounded by the quota
// config's MaxTenants (beyond it, new tenants are not tracked: never over).
//
// Safe for concurrent use; Run is its one goroutine, started and stopped by
// the caller.
type RetainedCounter struct {
	js     jetstream.JetStream
	stream string
	cfg    quota.Config
	every  time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	counts map[string]int64 // tenant → messages at the last poll (-1: not polled yet)
}

// NewRetainedCounter returns a counter of stream's messages per tenant
// against cfg's EventsRetained quotas, polling every every (0: 10 s).
func NewRetainedCounter(js jetstream.JetStream, stream string, cfg quota.Config, every time.Duration, log *slog.Logger) *RetainedCounter {
	if every <= 0 {
		every = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RetainedCounter{js: js, stream: stream, cfg: cfg, every: every, log: log, counts: make(map[string]int64)}
}

// Check returns a *quota.ExceededError (KindRetained) when tenant's count
// at the last poll is at or over its quota; nil when under, unlimited, or
// not polled yet. A tenant with a quota is tracked from its first Check.
func (c *RetainedCounter) Check(tenant string) error {
	lim := c.cfg.For(tenant).EventsRetained
	if lim <= 0 || wire.ValidTenant(tenant) != nil {
		return nil
	}
	c.mu.Lock()
	n, ok := c.counts[tenant]
	if !ok && len(c.counts) < max(1, c.cfg.MaxTenants) {
		c.counts[tenant] = -1
	}
	c.mu.Unlock()
	if n < lim {
		return nil
	}
	return &quota.ExceededError{Tenant: tenant, Kind: quota.KindRetained, Limit: float64(lim), RetryAfter: c.every}
}

// Count returns tenant's count at the last poll (-1: none yet).
func (c *RetainedCounter) Count(tenant string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.counts[tenant]; ok {
		return n
	}
	return -1
}

// Run polls every Every until ctx ends.
func (c *RetainedCounter) Run(ctx context.Context) {
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("retained events count failed", "err", err)
			}
		}
	}
}

// Refresh polls once: every tracked tenant's count is read from the stream.
func (c *RetainedCounter) Refresh(ctx context.Context) error {
	c.mu.Lock()
	tenants := make([]string, 0, len(c.counts))
	for t := range c.counts {
		tenants = append(tenants, t)
	}
	c.mu.Unlock()
	st, err := c.js.Stream(ctx, c.stream)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(wire.StoredPrefix+".*."+t+".*"))
		if err != nil {
			return err
		}
		var n uint64
		for _, k := range info.State.Subjects {
			n += k
		}
		c.mu.Lock()
		c.counts[t] = int64(n)
		c.mu.Unlock()
	}
	return nil
}
