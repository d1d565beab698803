package fanout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/wire"
)

// ErrSnapshotBusy is returned (wrapped) when the pipeline stayed busy,
// silent or unreachable for a thread's snapshot past HubConfig.SnapshotRetry:
// the client is refused with 503 and Retry-After.
var ErrSnapshotBusy = errors.New("fanout: the pipeline is busy; retry later")

// Retry reasons (label values of Metrics.SnapshotRetries).
const (
	RetryBusy    = "busy"    // the shard's snapshot queue was full
	RetryTimeout = "timeout" // no reply within SnapshotTimeout (a shard busy answering others)
	RetryBehind  = "behind"  // older than what the subscriber has: the owner is still replaying (subscriber.catchUp)
	RetryLost    = "lost"    // a reply in parts lost a part, its responder went away between windows, or it could not be sent ("unsent")
)

// Backoff between snapshot attempts: full jitter over an exponentially
// growing window, so that the retries of a join storm spread out instead of
// arriving together and filling the queue again.
const (
	snapBackoffMin = 20 * time.Millisecond
	snapBackoffMax = time.Second
)

// snapshot requests tenant/token's snapshot from its ingest shard — the
// whole one (window 0) or a windowed one (window > 0) — retrying the
// transient failures (retryReason) until h.cfg.SnapshotRetry has passed,
// ctx ends or the hub is closed. Every other failure is returned at once.
// The callers' single flight (feed.requestSnapshot) makes this one request
// per thread and window per node, however many subscribers join.
func (h *hub) snapshot(ctx context.Context, tenant, token string, window int) (*snapshot, error) {
	var sn *snapshot
	err := h.ask(ctx, tenant, token, wire.SnapRequest{Window: window}, func(msg *nats.Msg) (err error) {
		sn, err = decodeSnapshot(msg)
		return err
	})
	if sn != nil && sn.window != window {
		return nil, fmt.Errorf("%w: window %d in the reply to a request for %d", ErrBadSnapshot, sn.window, window)
	}
	return sn, err
}

// page requests the limit messages before the message before (the newest
// limit when before is "") of tenant/token, retrying as snapshot does.
func (h *hub) page(ctx context.Context, tenant, token, before string, limit int) (wire.Page, error) {
	var p wire.Page
	err := h.ask(ctx, tenant, token, wire.SnapRequest{Page: &wire.PageRequest{Before: before, Limit: limit}}, func(msg *nats.Msg) error {
		switch kind := msg.Header.Get(wire.HeaderErrorKind); kind {
		case "":
		case wire.SnapErrNoMessage:
			return fmt.Errorf("%w: %s", ErrNoMessage, trunc(msg.Header.Get(wire.HeaderError)))
		default:
			return fmt.Errorf("%w: %s: %s", ErrSnapshot, kind, trunc(msg.Header.Get(wire.HeaderError)))
		}
		var err error
		if p, err = wire.ParsePage(msg); err != nil {
			return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
		return nil
	})
	return p, err
}

// ask sends req on tenant/token's snapshot subject and hands the reply to
// decode, retrying the transient failures as snapshot documents.
func (h *hub) ask(ctx context.Context, tenant, token string, req wire.SnapRequest, decode func(*nats.Msg) error) error {
	subj := wire.SnapSubject(wire.Partition(tenant, token, h.cfg.Partitions), tenant, token)
	reqBody := req.Encode()
	deadline := time.Now().Add(h.cfg.SnapshotRetry)
	window := snapBackoffMin
	for {
		rctx, cancel := context.WithTimeout(ctx, min(h.cfg.SnapshotTimeout, max(time.Until(deadline), time.Millisecond)))
		hdr, body, err := h.requestParts(rctx, subj, reqBody)
		cancel()
		if err == nil {
			err = decode(&nats.Msg{Header: hdr, Data: body})
		} else {
			err = fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		if err == nil {
			h.m.Snapshots.WithLabelValues("ok").Inc()
			return nil
		}
		reason := retryReason(hdr, err)
		if reason == "" || ctx.Err() != nil {
			h.m.Snapshots.WithLabelValues("error").Inc()
			return err
		}
		wait := rand.N(window) + time.Millisecond
		if time.Until(deadline) < wait {
			h.m.Snapshots.WithLabelValues("gave_up").Inc()
			return fmt.Errorf("%w: %s for %v: %w", ErrSnapshotBusy, reason, h.cfg.SnapshotRetry, err)
		}
		h.m.SnapshotRetries.WithLabelValues(reason).Inc()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.closing:
			t.Stop()
			h.m.Snapshots.WithLabelValues("error").Inc()
			return ErrHubClosed
		case <-ctx.Done():
			t.Stop()
			h.m.Snapshots.WithLabelValues("error").Inc()
			return ctx.Err()
		}
		window = min(2*window, snapBackoffMax)
	}
}

// retryReason names why a failed attempt may be retried, or "" when it may
// not (a bad request, a wrong partition, a store error, a malformed reply,
// one over MaxMessageBytes). A reply that lost a part is retried: the
// next may come through (an ingest handing its partition over, a
// responder stopped between two windows).
// No responders is not retried: nothing owns the partition (no ingest, or a
// thread no ingest will ever answer for, as another tenant's), and the
// client is better told at once than after SnapshotRetry.
func retryReason(hdr nats.Header, err error) string {
	switch {
	case hdr.Get(wire.HeaderErrorKind) == wire.SnapErrBusy:
		return RetryBusy
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return RetryTimeout
	case errors.Is(err, wire.ErrPartLost), hdr.Get(wire.HeaderErrorKind) == wire.SnapErrUnsent:
		return RetryLost
	}
	return ""
}

// requestParts sends a request with reqBody on subject and returns the
// whole reply, assembled from its parts when it was larger than one NATS
// message (wire.Requester), of at most HubConfig.MaxMessageBytes. Every
// request whose reply may be large goes through it. A reply that carries
// an error in its headers (Tc-Error-Kind) is returned as is, for the
// caller to read. Errors: nats.ErrNoResponders, ctx's, the connection's,
// and wire.ErrPartLost, wire.ErrBadPart or wire.ErrTooLarge for a reply
// that could not be assembled (counted in BadReplies).
func (h *hub) requestParts(ctx context.Context, subject string, reqBody []byte) (hdr nats.Header, body []byte, err error) {
	m, err := h.req.Request(ctx, subject, reqBody, h.cfg.MaxMessageBytes)
	if err != nil {
		if errors.Is(err, wire.ErrPartLost) || errors.Is(err, wire.ErrBadPart) || errors.Is(err, wire.ErrTooLarge) {
			h.m.BadReplies.Inc()
			h.log.Warn("fanout: dropping reply", "subject", subject, "err", err)
		}
		return nil, nil, err
	}
	return m.Header, m.Data, nil
}

// storedSeq returns the stream seq of the last event the event stream holds
// for tenant/token, 0 when it holds none, or an error when the stream
// cannot say (no stream, no JetStream, a timeout): the caller then cannot
// tell a real cursor from a bogus one. One request to the JetStream API,
// bounded by SnapshotTimeout, answered by the stream's leader
// (wire.LeaderLast); the reply carries that event too, which is why it is
// asked only for a cursor ahead of the thread's snapshot.
func (h *hub) storedSeq(ctx context.Context, tenant, token string) (uint64, error) {
	stream := h.cfg.EventStream
	if stream == "" {
		stream = wire.DefaultStream
	}
	subj := wire.StoredSubject(wire.Partition(tenant, token, h.cfg.Partitions), tenant, token)
	rctx, cancel := context.WithTimeout(ctx, h.cfg.SnapshotTimeout)
	defer cancel()
	m, err := wire.LeaderLast(rctx, h.nc, "$JS.API.", stream, subj)
	if errors.Is(err, wire.ErrNoStoredMsg) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Seq, nil
}
