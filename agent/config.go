package agent

import (
	"errors"
	"time"
)

// Overflow names what Publish does when MaxPending events are already
// accepted and not yet resolved.
type Overflow uint8

const (
	// OverflowBlock makes Publish wait for room until its ctx is done; the
	// wait is counted (Stats.OverflowWaits) and a ctx expiry is returned as
	// ctx.Err() wrapped in ErrOverflow.
	OverflowBlock Overflow = iota
	// OverflowError makes Publish return ErrOverflow at once; counted in
	// Stats.OverflowErrors.
	OverflowError
)

// String returns "block" or "error".
func (o Overflow) String() string {
	if o == OverflowError {
		return "error"
	}
	return "block"
}

// Config configures a Publisher. Get the defaults from DefaultConfig and
// change what you need: unlike the limits, a zero Linger is meaningful (no
// batching), so a hand-built zero Config publishes one event per message.
type Config struct {
	// ID names this Publisher in every Nats-Msg-Id it sends
	// ("<ID>.<message sequence>"). It must be unique among the publishers
	// writing to the stream within its duplicate window, or their messages
	// are dropped as duplicates of each other. Empty: a random NUID, fresh for
	// every New.
	ID string

	// Linger is the longest an event waits for companions of the same thread
	// when that thread has nothing in flight. 0 disables batching: every
	// message carries exactly one event.
	Linger time.Duration
	// MaxBatchEvents and MaxBatchBytes bound one message (a batch is sent as
	// soon as either is reached). MaxBatchBytes is further capped by the
	// server's max payload. Zero: the defaults (256 events, 256 KiB).
	MaxBatchEvents int
	MaxBatchBytes  int

	// MaxPending bounds the events accepted by Publish and not yet resolved
	// (queued, in flight or waiting for a retry). Zero: 16384.
	MaxPending int
	// Overflow is what Publish does when MaxPending is reached.
	Overflow Overflow

	// AckTimeout is how long a message waits for its JetStream ack before the
	// attempt counts as failed and is retried. Zero: 5 s.
	AckTimeout time.Duration
	// MaxRetries is how many times a message is re-sent (with the same
	// Nats-Msg-Id) after a retryable failure: an ack timeout, a disconnect,
	// no stream responding. Zero: 5; negative: never retry.
	MaxRetries int
	// RetryWait is the pause before the first retry; it doubles for each
	// further retry, up to 2 s. Zero: 100 ms.
	RetryWait time.Duration

	// Validate checks one event before it is accepted; a non-nil error
	// rejects it (Publish returns the error wrapped in ErrInvalid and nothing
	// is sent). Nil: the AG-UI 1.0 codec (ValidateEvent). It is called
	// concurrently from every goroutine that calls Publish.
	Validate func(event []byte) error
}

// DefaultConfig returns the defaults: a 2 ms linger, 256 events or 256 KiB
// per message, 16384 pending events with OverflowBlock, a 5 s ack timeout and
// 5 retries from 100 ms.
func DefaultConfig() Config {
	return Config{
		Linger:         2 * time.Millisecond,
		MaxBatchEvents: 256,
		MaxBatchBytes:  256 << 10,
		MaxPending:     16384,
		Overflow:       OverflowBlock,
		AckTimeout:     5 * time.Second,
		MaxRetries:     5,
		RetryWait:      100 * time.Millisecond,
	}
}

// withDefaults fills the zero limits of c with DefaultConfig's.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxBatchEvents <= 0 {
		c.MaxBatchEvents = d.MaxBatchEvents
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = d.MaxBatchBytes
	}
	if c.MaxPending <= 0 {
		c.MaxPending = d.MaxPending
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = d.AckTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = d.MaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.RetryWait <= 0 {
		c.RetryWait = d.RetryWait
	}
	if c.Linger <= 0 {
		c.Linger = 0
		c.MaxBatchEvents = 1 // linger 0 means no batching at all
	}
	if c.Validate == nil {
		c.Validate = ValidateEvent
	}
	return c
}

// Errors returned by Publish, PublishEvent and the futures.
var (
	// ErrInvalid wraps the validation error of a rejected event (for the
	// default validator, a *codec.Error: errors.As finds it).
	ErrInvalid = errors.New("agent: invalid event")
	// ErrOtherThread: the event's threadId (RUN_STARTED, RUN_FINISHED, or
	// RUN_STARTED.input) names another thread than the one it is published
	// to. It wraps ErrInvalid.
	ErrOtherThread error = &wrapErr{"agent: event names another thread", ErrInvalid}
	// ErrTooLarge: the event alone exceeds the server's max payload.
	ErrTooLarge = errors.New("agent: event larger than the server's max payload")
	// ErrOverflow: MaxPending events are pending (OverflowError), or the ctx
	// ended while Publish waited for room (OverflowBlock).
	ErrOverflow = errors.New("agent: too many pending events")
	// ErrClosed: the Publisher is closing or closed. A future resolved with
	// it belongs to an event that Close abandoned when its ctx ended: it may
	// or may not have been stored.
	ErrClosed = errors.New("agent: publisher closed")
	// ErrBadTenant and ErrBadThread: the tenant is not a valid name, or the
	// thread id is too long (see Subject).
	ErrBadTenant = errors.New("agent: invalid tenant name")
	ErrBadThread = errors.New("agent: invalid thread id")
	// ErrPublish wraps the last error of a message that could not be stored
	// (after its retries, or at once for a non-retryable error such as a
	// JetStream API error).
	ErrPublish = errors.New("agent: publish failed")
)

// wrapErr is a sentinel that is also its parent sentinel.
type wrapErr struct {
	msg    string
	parent error
}

func (e *wrapErr) Error() string { return e.msg }
func (e *wrapErr) Unwrap() error { return e.parent }
