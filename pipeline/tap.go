package pipeline

// NOTE: the durable tap. With Config.TapStream set, every tap message (a
// normalized event or a run summary, tap.<tenant>.<TYPE>.<thread>) is
// published as a JetStream publish whose acknowledgement is awaited in the
// background: it is one core NATS message on the tap subject all the same,
// so live subscribers (GET /v1/tap) get it as before, and the tap stream
// stores it. The shard never waits for the store: at most TapMaxInFlight
// publishes await their ack (per ingest instance, shared by its shards);
// past that a tap message goes out as a plain core NATS publish, which the
// stream still stores when it can, unacknowledged (counted "unconfirmed").
// An ack that says error, or none within tapAckTimeout, is counted
// "failed" and logged (at most once a second): that message may be missing
// from the stream, not from the live tap. Nothing of this touches the
// event log, its acks or its checkpoints: a tap stream that is down or
// slow loses tap messages (counted), never events, and never stalls a
// shard.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// tapAckTimeout bounds the wait for a tap publish's ack.
const tapAckTimeout = 5 * time.Second

// Label values of Metrics.TapPublished.
const (
	tapStored      = "stored"      // acknowledged by the tap stream
	tapDuplicate   = "duplicate"   // acknowledged as a duplicate (a run summary published again)
	tapFailed      = "failed"      // refused, or no ack within tapAckTimeout
	tapUnconfirmed = "unconfirmed" // sent without awaiting an ack (TapMaxInFlight in flight)
)

// tapPublisher is the Publisher of tap messages when the tap is durable.
// It is shared by an instance's shards and safe for concurrent use.
type tapPublisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	max int
	log *slog.Logger

	stored, duplicate, failed, unconfirmed prometheus.Counter

	lastLog    atomic.Int64 // Unix ns of the last failure logged
	suppressed atomic.Int64
}

func newTapPublisher(nc *nats.Conn, cfg *Config, m *Metrics, log *slog.Logger) (*tapPublisher, error) {
	p := &tapPublisher{nc: nc, max: cfg.TapMaxInFlight, log: log,
		stored: m.TapPublished.WithLabelValues(tapStored), duplicate: m.TapPublished.WithLabelValues(tapDuplicate),
		failed: m.TapPublished.WithLabelValues(tapFailed), unconfirmed: m.TapPublished.WithLabelValues(tapUnconfirmed)}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.TapMaxInFlight),
		jetstream.WithPublishAsyncTimeout(tapAckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, err error) { p.fail(msg, err) }),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, _ *nats.Msg, ack *jetstream.PubAck) {
			if ack.Duplicate {
				p.duplicate.Inc()
				return
			}
			p.stored.Inc()
		}))
	if err != nil {
		return nil, err
	}
	p.js = js
	return p, nil
}

// PublishMsg sends a copy of msg to the tap stream, awaiting its ack in the
// background, or, with TapMaxInFlight acks awaited, as a plain publish.
// Its error is the connection's (the message did not leave).
func (p *tapPublisher) PublishMsg(msg *nats.Msg) error {
	if p.js.PublishAsyncPending() < p.max {
		c := &nats.Msg{Subject: msg.Subject, Data: bytes.Clone(msg.Data), Header: make(nats.Header, len(msg.Header))}
		for k, v := range msg.Header {
			c.Header[k] = append([]string(nil), v...)
		}
		_, err := p.js.PublishMsgAsync(c, jetstream.WithStallWait(time.Microsecond))
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return err
		}
	}
	p.unconfirmed.Inc()
	return p.nc.PublishMsg(msg)
}

func (p *tapPublisher) fail(msg *nats.Msg, err error) {
	p.failed.Inc()
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if now-last < int64(time.Second) || !p.lastLog.CompareAndSwap(last, now) {
		p.suppressed.Add(1)
		return
	}
	p.log.Warn("pipeline: tap stream did not store a tap message (the live tap had it; the event log is not affected)",
		"subject", msg.Subject, "err", err, "suppressed", p.suppressed.Swap(0))
}

// wait waits, up to d, for the acks in flight.
func (p *tapPublisher) wait(d time.Duration) {
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(d):
	}
}

// runSummaryMsgID is the Nats-Msg-Id of a run's summary: derived from the
// tenant, the thread token, the stream seq of the run's first event and
// its run id, so the summary of one run published again (a replay after a
// crash) has the same id, and that of a later run that re-uses a run id
// does not. Hashed: thread tokens may be long.
func runSummaryMsgID(tenant, token string, startSeq uint64, runID string) string {
	h := sha256.New()
	for _, s := range []string{tenant, token, strconv.FormatUint(startSeq, 10), runID} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return "rs-" + hex.EncodeToString(h.Sum(nil)[:16])
}
