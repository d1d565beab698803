package agent

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/threadcast/threadcast/codec"
)

// StreamOptions tunes PublishStream.
type StreamOptions struct {
	// MaxEventBytes bounds one event of the input (codec.StreamReader's
	// limit); a larger one ends the stream with a KindTooLarge error. Zero:
	// codec.DefaultMaxEventSize.
	MaxEventBytes int
	// MaxErrors bounds how many EventErrors StreamResult keeps per list (the
	// counts stay exact). Zero: 100.
	MaxErrors int
	// Admit, when set, is called with each event read, before it is
	// published (ev is valid only during the call). A non-nil error ends
	// the stream there, as a read error would: that event is neither
	// published nor counted in Events, the events before it are, and
	// PublishStream returns the error as is. The HTTP bridge charges its
	// tenant's quotas here.
	Admit func(ev []byte) error
	// MsgID, when set, names each event's Nats-Msg-Id from its 0-based
	// index in the input: every event is published alone with that id
	// (Publisher.PublishWithID), so that the same input published again
	// within the stream's Duplicates window stores each event once. The
	// HTTP bridge derives it from the request's Idempotency-Key.
	MsgID func(index int) string
	// Window bounds the bytes of the events published by this stream and
	// not yet resolved: before publishing an event that would take it over,
	// PublishStream waits for the oldest ones. With the reader's buffer it
	// bounds what one stream holds in memory, whatever the input's length
	// (about MaxEventBytes for the read buffer, the event being read, and
	// Window: see the bridge's documentation). Zero: DefaultStreamWindow;
	// negative: unbounded (up to the Publisher's MaxPending events).
	Window int
}

// DefaultStreamWindow is StreamOptions.Window's default: 1 MiB, four
// default batches.
const DefaultStreamWindow = 1 << 20

// EventError is an event of a stream that is not in the event log, and why.
type EventError struct {
	Index int   // 0-based position of the event in the input stream
	Err   error // ErrInvalid / ErrTooLarge (rejected) or ErrPublish / ErrClosed (failed)
}

// StreamResult is what PublishStream did with each event of its input.
type StreamResult struct {
	Format   string // "jsonl", "array", "sse", or "" when nothing was read
	Events   int    // events read from the input, valid or not
	Accepted int    // events stored in the stream (acked)
	// Duplicates counts the accepted events the server had already stored
	// (StreamOptions.MsgID: an earlier attempt at the same input).
	Duplicates int
	// Rejected are events Publish refused (invalid, too large): nothing was
	// sent for them. Failed are events accepted but not stored (publish
	// failure, Close). Both are in input order and capped at
	// StreamOptions.MaxErrors; RejectedCount and FailedCount are exact.
	Rejected      []EventError
	RejectedCount int
	Failed        []EventError
	FailedCount   int
}

// PublishStream reads a stream of AG-UI events of one thread (JSONL, a JSON
// array, or SSE, detected from the first byte; see codec.NewStreamReader) and
// publishes each through p as it is read, so a long-running stream (an
// agent's SSE response being relayed) reaches the event log while it is still
// arriving. An invalid event is recorded in the result and skipped; the
// events around it are published. When the input is exhausted it waits for
// every accepted event's ack, and returns the result.
//
// The error is non-nil when the stream could not be read to its end: bad
// framing (a *codec.Error of Kind KindStream or KindTooLarge), a read error
// from r (returned as is), or a Publish error that is not about one event
// (ErrBadTenant, ErrBadThread, ErrClosed, ErrOverflow, ctx's error). Events
// read before that point are published and waited for all the same (under
// ctx), and the result counts them.
func PublishStream(ctx context.Context, p *Publisher, tenant, thread string, r io.Reader, opts StreamOptions) (StreamResult, error) {
	var res StreamResult
	if _, err := Subject(tenant, thread); err != nil {
		return res, err
	}
	if opts.MaxErrors <= 0 {
		opts.MaxErrors = 100
	}
	if opts.Window == 0 {
		opts.Window = DefaultStreamWindow
	}
	sr := codec.NewStreamReader(r)
	defer sr.Close()
	if opts.MaxEventBytes > 0 {
		sr.SetMaxEventSize(opts.MaxEventBytes)
	}
	// pending holds the futures in input order; resolved ones are collected
	// from the front as we go, so it stays about as long as what is in flight.
	type pendingEvent struct {
		index, size int
		fut         *Future
	}
	var pending []pendingEvent
	pendingBytes := 0
	collect := func(f *Future, index int) {
		ack, err := f.Result()
		if err != nil {
			res.FailedCount++
			if len(res.Failed) < opts.MaxErrors {
				res.Failed = append(res.Failed, EventError{Index: index, Err: err})
			}
			return
		}
		res.Accepted++
		if ack.Duplicate {
			res.Duplicates++
		}
	}
	pop := func() {
		pe := pending[0]
		collect(pe.fut, pe.index)
		pendingBytes -= pe.size
		pending[0] = pendingEvent{}
		pending = pending[1:]
	}

	var streamErr error
	for {
		ev, err := sr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				streamErr = err
			}
			break
		}
		if opts.Admit != nil {
			if err := opts.Admit(ev); err != nil {
				streamErr = err
				break
			}
		}
		// Wait for room in the window before taking this event's copy. An
		// event that failed frees its room like a stored one (pop records
		// it); only the end of ctx ends the stream here.
		for opts.Window > 0 && len(pending) > 0 && pendingBytes+len(ev) > opts.Window {
			if _, err := pending[0].fut.Wait(ctx); err != nil && !isDone(pending[0].fut) {
				streamErr = fmt.Errorf("agent: waiting for acks: %w", err)
				break
			}
			pop()
		}
		if streamErr != nil {
			break
		}
		index := res.Events
		res.Events++
		var f *Future
		if opts.MsgID != nil {
			f, err = p.PublishWithID(ctx, tenant, thread, ev, opts.MsgID(index))
		} else {
			f, err = p.Publish(ctx, tenant, thread, ev)
		}
		if err != nil {
			if errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) {
				res.RejectedCount++
				if len(res.Rejected) < opts.MaxErrors {
					res.Rejected = append(res.Rejected, EventError{Index: index, Err: err})
				}
				continue
			}
			streamErr = err
			break
		}
		pending = append(pending, pendingEvent{index, len(ev), f})
		pendingBytes += len(ev)
		for len(pending) > 0 && isDone(pending[0].fut) {
			pop()
		}
	}
	res.Format = sr.Format()
	for _, pe := range pending {
		if _, err := pe.fut.Wait(ctx); err != nil && !isDone(pe.fut) {
			return res, fmt.Errorf("agent: waiting for acks: %w", err)
		}
		collect(pe.fut, pe.index)
	}
	return res, streamErr
}

func isDone(f *Future) bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
