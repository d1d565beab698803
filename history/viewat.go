package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// ErrNoThread is ViewAt's error for a thread with no event in the event
// log.
var ErrNoThread = errors.New("history: the thread has no stored event")

// BeyondError is ViewAt's error for a seq past the thread's last stored
// event.
type BeyondError struct{ At, Last uint64 }

func (e *BeyondError) Error() string {
	return fmt.Sprintf("history: seq %d is beyond the thread's last stored event, seq %d", e.At, e.Last)
}

// viewAtBatch is how many stored messages ViewAt fetches at a time.
const viewAtBatch = 256

// ViewAt returns thread's view as it was after event log seq at: every
// stored event of the thread (tenant, thread id) with a seq up to at,
// folded from an empty thread as ingest folds them (FoldStored). It reads
// from stream (the event log) through an ephemeral consumer filtered on
// the thread's stored subject, so its cost is the thread's events up to
// at, whatever else the log holds; it changes nothing. at past the
// thread's last stored event is a *BeyondError; a thread with none,
// ErrNoThread.
//
// What it cannot see: events the event log no longer keeps (retention by
// age or bytes removes a thread's oldest events first, and the view is
// then folded from the oldest it keeps), and what ingest did not apply for
// reasons of the moment rather than of the events: events shed over a
// tenant quota, or refused because the view reached its size limit, are
// folded here.
func ViewAt(ctx context.Context, js jetstream.JetStream, stream, tenant, thread string, at uint64) (*reducer.Thread, error) {
	subj := wire.StoredPrefix + ".*." + tenant + "." + wire.EncodeThread(thread)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("history: stream %s: %w", stream, err)
	}
	last, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, ErrNoThread
	}
	if err != nil {
		return nil, fmt.Errorf("history: last event: %w", err)
	}
	if at > last.Sequence {
		return nil, &BeyondError{At: at, Last: last.Sequence}
	}
	cc := jetstream.ConsumerConfig{
		Name:              "tcat_" + nuid.Next(),
		FilterSubject:     subj,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 30 * time.Second, // a backstop: deleted below
	}
	cons, err := st.CreateConsumer(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("history: consumer: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = st.DeleteConsumer(dctx, cc.Name)
	}()
	th := reducer.NewThread(thread)
	var dec codec.Decoder
	var ev codec.Event
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := cons.Fetch(viewAtBatch, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("history: fetch: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			seq := meta.Sequence.Stream
			if seq > at {
				return th, nil
			}
			for data := m.Data(); ; {
				line, rest, ok := NextEvent(data)
				if !ok {
					break
				}
				derr := dec.Decode(line, &ev)
				FoldStored(th, thread, seq, &ev, derr, dec.Warnings())
				data = rest
			}
			if seq == at || seq >= last.Sequence {
				return th, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("history: fetch: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("history: the event log delivered nothing up to seq %d (its last event for the thread is %d)", at, last.Sequence)
		}
	}
}
