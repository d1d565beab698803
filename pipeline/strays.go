package pipeline

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// Strays are messages the event stream stored but no partition consumer
// will ever see. The stream takes agui.*.*.events, and its subject
// transform moves each message to aguip.<p>.<tenant>.<thread>, where the
// partitions read; but NATS lets a publisher use a wildcard as a literal
// subject token (`nats pub 'agui.acme.*.events'`), the stream matches such
// a subject and acknowledges it, and the transform leaves it where it is.
// Everything still stored under wire.EventsPrefix is therefore a stray: one
// durable consumer, shared by every ingest instance, dead-letters each with
// kind wire.ErrKindSubject and its reason, and acks it.

// straysFilter is the filter of the strays consumer: the stream's own
// subjects, which the transform empties of every publishable subject.
const straysFilter = wire.EventsPrefix + ".>"

// straysConsumer creates or binds the strays consumer (<prefix>-strays).
func straysConsumer(ctx context.Context, stream jetstream.Stream, cfg *Config) (jetstream.Consumer, error) {
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       cfg.ConsumerPrefix + "-strays",
		Description:   "Threadcast ingest: messages stored under a subject no thread can have",
		FilterSubject: straysFilter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		Replicas:      cfg.Replicas,
		MemoryStorage: cfg.ConsumerMemory,
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: strays consumer: %w", err)
	}
	return cons, nil
}

// consumeStrays dead-letters and acks every stray until the returned
// context is stopped (Run stops it with the partitions' consumers).
func (in *Ingest) consumeStrays(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	return cons.Consume(func(msg jetstream.Msg) {
		var seq uint64
		if meta, err := msg.Metadata(); err == nil {
			seq = meta.Sequence.Stream
		}
		subj := msg.Subject()
		in.m.Messages.Inc()
		deadLetter(in.nc, in.m, tokenAt(subj, 1), tokenAt(subj, 2), msg.Data(), wire.ErrKindSubject,
			fmt.Sprintf("subject %q names no thread: a wildcard is not a tenant or thread token", truncate(subj)), seq, -1)
		_ = msg.Ack() // at least once: a lost ack redelivers, and the dead letter repeats
	}, jetstream.PullMaxMessages(64), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		in.log.Debug("consume strays", "err", err)
	}))
}

// deadLetter publishes rejected input on dlq.<tenant>.<token> and counts it.
// A tenant or token that is not valid (a wildcard among them: see strays)
// is replaced by "_", so that the dead letter's own subject is always a
// literal one; the reason says what was wrong.
func deadLetter(pub Publisher, m *Metrics, tenant, token string, data []byte, kind, reason string, seq uint64, idx int) {
	// Counted first: whoever sees the dead letter sees it counted.
	m.DeadLetters.WithLabelValues(kind).Inc()
	_ = pub.PublishMsg(deadLetterMsg(tenant, token, data, kind, reason, seq, idx, ""))
}

// deadLetterMsg is the dead letter of data on dlq.<tenant>.<token>; an
// invalid tenant or token is written "_". quotaName is wire.HeaderQuota's value
// ("": none).
func deadLetterMsg(tenant, token string, data []byte, kind, reason string, seq uint64, idx int, quotaName string) *nats.Msg {
	if wire.ValidTenant(tenant) != nil {
		tenant = "_"
	}
	if _, err := wire.DecodeThread(token); err != nil {
		token = "_"
	}
	h := nats.Header{
		wire.HeaderErrorKind: {kind},
		wire.HeaderError:     {truncateN(reason, 512)},
		wire.HeaderSeq:       {strconv.FormatUint(seq, 10)},
	}
	if idx >= 0 {
		h[wire.HeaderEventIndex] = []string{strconv.Itoa(idx)}
	}
	if quotaName != "" {
		h[wire.HeaderQuota] = []string{quotaName}
	}
	return &nats.Msg{Subject: wire.DLQSubject(tenant, token), Data: data, Header: h}
}
