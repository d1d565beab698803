package agent

import "sync/atomic"

// Stats is a snapshot of a Publisher's counters. All counts are totals since
// New except Pending.
type Stats struct {
	Accepted uint64 // events Publish accepted (each resolves exactly once)
	Rejected uint64 // events Publish refused as invalid or too large
	// OverflowWaits counts Publish calls that found MaxPending reached and
	// waited (OverflowBlock); OverflowErrors those refused (OverflowError).
	OverflowWaits  uint64
	OverflowErrors uint64
	Messages       uint64 // NATS messages formed (a retry is not a new message)
	Retries        uint64 // re-sends after a retryable failure
	Acked          uint64 // events stored (their future resolved with an Ack)
	Duplicates     uint64 // messages the server acked as already stored
	Failed         uint64 // events whose future resolved with an error
	Pending        int    // events accepted and not yet resolved
}

type counters struct {
	accepted, rejected            atomic.Uint64
	overflowWaits, overflowErrors atomic.Uint64
	messages, retries             atomic.Uint64
	acked, duplicates, failed     atomic.Uint64
}

// Stats returns the current counters. Safe for concurrent use.
func (p *Publisher) Stats() Stats {
	return Stats{
		Accepted:       p.ctr.accepted.Load(),
		Rejected:       p.ctr.rejected.Load(),
		OverflowWaits:  p.ctr.overflowWaits.Load(),
		OverflowErrors: p.ctr.overflowErrors.Load(),
		Messages:       p.ctr.messages.Load(),
		Retries:        p.ctr.retries.Load(),
		Acked:          p.ctr.acked.Load(),
		Duplicates:     p.ctr.duplicates.Load(),
		Failed:         p.ctr.failed.Load(),
		Pending:        len(p.slots),
	}
}
