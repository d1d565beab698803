package wire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// ErrRequesterClosed is the error of a Request on, or waiting in, a closed
// Requester.
var ErrRequesterClosed = errors.New("wire: requester closed")

// Requester sends requests whose replies may come in parts (see Request)
// over one subscription of its connection: a wildcard inbox, each request's
// messages routed to it by the inbox's last token. A subscription per
// request costs the server a SUB and an UNSUB, and its subject index an
// insert and a removal, for every request: the bulk of a join storm's
// thousands of snapshot requests. The subscription is made by the first
// Request and ended by Close. Safe for concurrent use.
type Requester struct {
	nc     *nats.Conn
	prefix string // the inbox, with its trailing "."

	mu      sync.Mutex
	sub     *nats.Subscription
	next    uint64
	waiting map[string]*replyQueue
	closed  bool
}

// replyQueue holds one request's messages until its caller reads them. It
// is unbounded, as a subscription of its own with no pending limits was:
// what a responder sends is bounded by its reply window, and the caller
// asks for the next window only once it has read this one.
type replyQueue struct {
	mu     sync.Mutex
	msgs   []*nats.Msg
	closed bool
	ready  chan struct{} // capacity 1: "msgs or closed changed"
}

// NewRequester returns a Requester on nc. Its inbox is nc.NewInbox(), so a
// custom inbox prefix is kept.
func NewRequester(nc *nats.Conn) *Requester {
	return &Requester{nc: nc, prefix: nc.NewInbox() + ".", waiting: make(map[string]*replyQueue)}
}

// Request is the package's Request over r's subscription: it publishes a
// request with body on subject and returns the whole reply, assembled from
// its parts, of at most max bytes (0: no limit), with the same errors, and
// ErrRequesterClosed once r is closed.
func (r *Requester) Request(ctx context.Context, subject string, body []byte, max int) (*nats.Msg, error) {
	token, q, err := r.open()
	if err != nil {
		return nil, err
	}
	defer r.done(token)
	return request(ctx, r.nc, subject, r.prefix+token, body, max, q.next)
}

// Close ends r's subscription; requests waiting end with
// ErrRequesterClosed. Idempotent.
func (r *Requester) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for _, q := range r.waiting {
		q.close()
	}
	clear(r.waiting)
	if r.sub == nil {
		return nil
	}
	return r.sub.Unsubscribe()
}

// open registers a request: its inbox token and queue.
func (r *Requester) open() (string, *replyQueue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return "", nil, ErrRequesterClosed
	}
	if r.sub == nil {
		// The SUB goes out on the connection before the request's PUB, so
		// the server has it before any reply.
		sub, err := r.nc.Subscribe(r.prefix+"*", r.route)
		if err != nil {
			return "", nil, fmt.Errorf("wire: subscribe reply inbox: %w", err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		r.sub = sub
	}
	r.next++
	token := strconv.FormatUint(r.next, 36)
	q := &replyQueue{ready: make(chan struct{}, 1)}
	r.waiting[token] = q
	return token, q, nil
}

func (r *Requester) done(token string) {
	r.mu.Lock()
	delete(r.waiting, token)
	r.mu.Unlock()
}

// route hands a message to its request's queue; one for a request that
// has ended is dropped.
func (r *Requester) route(m *nats.Msg) {
	if len(m.Subject) <= len(r.prefix) {
		return
	}
	r.mu.Lock()
	q := r.waiting[m.Subject[len(r.prefix):]]
	r.mu.Unlock()
	if q != nil {
		q.push(m)
	}
}

func (q *replyQueue) push(m *nats.Msg) {
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	q.wake()
}

func (q *replyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *replyQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next returns the request's next message, as a subscription's
// NextMsgWithContext would: nats.ErrNoResponders for the server's
// no-responders status.
func (q *replyQueue) next(ctx context.Context) (*nats.Msg, error) {
	for {
		q.mu.Lock()
		if len(q.msgs) > 0 {
			m := q.msgs[0]
			q.msgs[0] = nil
			q.msgs = q.msgs[1:]
			q.mu.Unlock()
			if len(m.Data) == 0 && m.Header.Get(statusHeader) == noResponders {
				return nil, nats.ErrNoResponders
			}
			return m, nil
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, ErrRequesterClosed
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// statusHeader and noResponders are the status the server answers a
// request with when nothing is subscribed to its subject.
const (
	statusHeader = "Status"
	noResponders = "503"
)
