package fanout

import (
	"context"
	"encoding/json"
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

// storedSeq returns the stream seq of the last event the event stream holds
// for tenant/token, 0 when it holds none, or an error when the stream
// cannot say (no stream, no JetStream, a timeout): the caller then cannot
// tell a real cursor from a bogus one. One request to the JetStream API,
// bounded by SnapshotTimeout; the reply carries that event too, which is
// why it is asked only for a cursor ahead of the thread's snapshot.
func (h *Hub) storedSeq(ctx context.Context, tenant, token string) (uint64, error) {
	stream := h.cfg.EventStream
	if stream == "" {
		stream = pipeline.DefaultStream
	}
	subj := pipeline.StoredSubject(pipeline.Partition(tenant, token, h.cfg.Partitions), tenant, token)
	req, _ := json.Marshal(struct {
		LastBySubj string `json:"last_by_subj"`
	}{subj})
	rctx, cancel := context.WithTimeout(ctx, h.cfg.SnapshotTimeout)
	defer cancel()
	msg, err := h.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("fanout: stream message reply: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == jsNoMessageFound:
		return 0, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("fanout: stream %s: %s (%d)", stream, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return 0, errors.New("fanout: stream message reply without a message")
	}
	return resp.Message.Seq, nil
}

// jsNoMessageFound is JetStream's error code for a get that matched nothing
// (JSNoMessageFoundErr).
const jsNoMessageFound = 10037
