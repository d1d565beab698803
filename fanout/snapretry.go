package fanout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/pipeline"
)

// ErrSnapshotBusy is returned (wrapped) when the pipeline stayed busy,
// silent or unreachable for a thread's snapshot past HubConfig.SnapshotRetry:
// the client is refused with 503 and Retry-After.
var ErrSnapshotBusy = errors.New("fanout: the pipeline is busy; retry later")

// Retry reasons (label values of Metrics.SnapshotRetries).
const (
	RetryBusy    = "busy"    // the shard's snapshot queue was full
	RetryTimeout = "timeout" // no reply within SnapshotTimeout (a shard busy answering others)
	RetryBehind  = "behind"  // older than what the subscriber has: the owner is still replaying (Subscriber.catchUp)
)

// Backoff between snapshot attempts: full jitter over an exponentially
// growing window, so that the retries of a join storm spread out instead of
// arriving together and filling the queue again.
const (
	snapBackoffMin = 20 * time.Millisecond
	snapBackoffMax = time.Second
)

// snapshot requests tenant/token's snapshot from its ingest shard, retrying
// the transient failures (retryReason) until h.cfg.SnapshotRetry has passed,
// ctx ends or the hub is closed. Every other failure is returned at once. The callers'
// single flight (feed.requestSnapshot) makes this one request per thread
// per node, however many subscribers join.
func (h *Hub) snapshot(ctx context.Context, tenant, token string) (*snapshot, error) {
	subj := pipeline.SnapSubject(pipeline.Partition(tenant, token, h.cfg.Partitions), tenant, token)
	deadline := time.Now().Add(h.cfg.SnapshotRetry)
	window := snapBackoffMin
	for {
		rctx, cancel := context.WithTimeout(ctx, min(h.cfg.SnapshotTimeout, max(time.Until(deadline), time.Millisecond)))
		msg, err := h.nc.RequestWithContext(rctx, subj, nil)
		cancel()
		var sn *snapshot
		if err == nil {
			sn, err = decodeSnapshot(msg)
		} else {
			err = fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		if err == nil {
			h.m.Snapshots.WithLabelValues("ok").Inc()
			return sn, nil
		}
		reason := retryReason(msg, err)
		if reason == "" || ctx.Err() != nil {
			h.m.Snapshots.WithLabelValues("error").Inc()
			return nil, err
		}
		wait := rand.N(window) + time.Millisecond
		if time.Until(deadline) < wait {
			h.m.Snapshots.WithLabelValues("gave_up").Inc()
			return nil, fmt.Errorf("%w: %s for %v: %w", ErrSnapshotBusy, reason, h.cfg.SnapshotRetry, err)
		}
		h.m.SnapshotRetries.WithLabelValues(reason).Inc()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.closing:
			t.Stop()
			h.m.Snapshots.WithLabelValues("error").Inc()
			return nil, ErrHubClosed
		case <-ctx.Done():
			t.Stop()
			h.m.Snapshots.WithLabelValues("error").Inc()
			return nil, ctx.Err()
		}
		window = min(2*window, snapBackoffMax)
	}
}

// retryReason names why a failed attempt may be retried, or "" when it may
// not (a bad request, a wrong partition, a store error, a malformed reply).
// No responders is not retried: nothing owns the partition (no ingest, or a
// thread no ingest will ever answer for, as another tenant's), and the
// client is better told at once than after SnapshotRetry.
func retryReason(msg *nats.Msg, err error) string {
	switch {
	case msg != nil && msg.Header.Get(pipeline.HeaderErrorKind) == pipeline.SnapErrBusy:
		return RetryBusy
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return RetryTimeout
	}
	return ""
}
