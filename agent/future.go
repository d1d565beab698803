package agent

import "context"

// Ack says where an event was stored.
type Ack struct {
	// Stream and Seq name the stream and the stream sequence of the message
	// that carried the event. Several events share a Seq when they were
	// batched; Index is the event's 0-based position in that message.
	Stream string
	Seq    uint64
	Index  int
	// Duplicate is true when the server had already stored the message: a
	// retry whose earlier attempt was stored but whose ack was lost. The
	// event is in the stream exactly once either way.
	Duplicate bool
}

// Future is the result of one accepted event. It resolves exactly once:
// with an Ack once the JetStream ack of the message carrying the event has
// arrived, or with an error once the message failed for good (ErrPublish) or
// was abandoned by Close (ErrClosed). A Future is safe for concurrent use.
type Future struct {
	done chan struct{}
	ack  Ack
	err  error
}

func newFuture() *Future { return &Future{done: make(chan struct{})} }

// Done is closed when the future has resolved.
func (f *Future) Done() <-chan struct{} { return f.done }

// Result returns the ack or the error. It must be called only after Done is
// closed (it does not wait); use Wait to wait.
func (f *Future) Result() (Ack, error) { return f.ack, f.err }

// Wait waits until the future resolves or ctx ends, and returns the result.
// If ctx ends first it returns ctx.Err(); the event stays pending and still
// resolves later. A future already resolved returns its result whatever
// the state of ctx.
func (f *Future) Wait(ctx context.Context) (Ack, error) {
	select {
	case <-f.done:
		return f.ack, f.err
	case <-ctx.Done():
		// select picks at random among ready cases: the future may have
		// resolved by now, and its result is the answer then.
		select {
		case <-f.done:
			return f.ack, f.err
		default:
			return Ack{}, ctx.Err()
		}
	}
}

// resolve is called once, under the Publisher's lock.
func (f *Future) resolve(a Ack, err error) {
	f.ack, f.err = a, err
	close(f.done)
}
