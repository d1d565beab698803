package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// NOTE: flow control of large replies. A reply sent in parts all at once
// arrives at the NATS server faster than the requester's connection drains
// it; past the server's max_pending for that connection (64 MiB by
// default) the server closes the requester's connection as a slow
// consumer — every subscription of that fanout node, not just the reply.
// So a reply larger than a window is sent one window at a time, each
// asked for by the requester once it has received the previous one:
//
//	responder → reply inbox: parts [0, k), the last with
//	            Tc-Part-More: tc.part.<responder>.<reply> (k parts = one window)
//	requester → <responder subject>, reply to its inbox, body: "k"
//	responder → reply inbox: parts [k, 2k), ... the last window without it
//
// The responder holds the body until its last window is asked for, or for
// TTL after the previous one; a request for a window it no longer holds is
// answered with Tc-Part-Error, and the requester fails with ErrPartLost
// (the caller retries the whole request). At most one window per reply is
// in flight, so the server buffers at most a window per concurrent reply.

// Window headers.
const (
	HeaderPartMore  = "Tc-Part-More"  // on a window's last part: where to ask for the next
	HeaderPartError = "Tc-Part-Error" // a window request that could not be served, and why
)

// Defaults of ResponderConfig.
const (
	DefaultWindow  = 16 << 20
	DefaultHoldTTL = 30 * time.Second
	DefaultMaxHeld = 256
	// DefaultSubjectPrefix puts window requests among Threadcast's
	// internal subjects (tc.>), beside snapshot requests.
	DefaultSubjectPrefix = "tc.part"
)

// ErrTooManyHeld is returned by Respond when MaxHeld replies are already
// held for their requesters.
var ErrTooManyHeld = errors.New("wire: too many large replies in flight")

// ResponderConfig configures a Responder; zero values mean the defaults.
type ResponderConfig struct {
	// PartSize is the largest part body (PartSize of the connection's max
	// payload when 0).
	PartSize int
	// Window is the bytes sent before waiting for the requester to ask for
	// more; well under the server's max_pending (64 MiB by default), since
	// each reply in flight may have a window buffered there.
	Window int
	// HoldTTL is how long a reply is held after its last window was sent
	// and not asked for.
	HoldTTL time.Duration
	// MaxHeld bounds the replies held at once (their bodies stay in
	// memory until fetched or expired).
	MaxHeld int
	// SubjectPrefix is where the windows are asked for:
	// <prefix>.<responder id>.<reply id>. Requesters must be allowed to
	// publish there, the responder to subscribe.
	SubjectPrefix string
}

// Responder answers requests with replies of any size, in windows (see
// the NOTE). It is safe for concurrent use. NewResponder subscribes to its
// window subject; Close unsubscribes (the connection owns the callback
// goroutine) and drops what is held.
type Responder struct {
	nc      *nats.Conn
	cfg     ResponderConfig
	subject string // <inbox>.<id> is where the windows of reply id are asked for
	sub     *nats.Subscription

	mu     sync.Mutex
	held   map[uint64]*heldReply
	nextID uint64
	closed bool
}

type heldReply struct {
	reply   string
	hdr     nats.Header
	body    []byte // not modified by anyone after Respond
	expires time.Time
}

// NewResponder returns a Responder sending on nc.
func NewResponder(nc *nats.Conn, cfg ResponderConfig) (*Responder, error) {
	if cfg.PartSize <= 0 {
		cfg.PartSize = PartSize(nc.MaxPayload())
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	cfg.Window = max(cfg.Window, cfg.PartSize)
	if cfg.HoldTTL <= 0 {
		cfg.HoldTTL = DefaultHoldTTL
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	r := &Responder{nc: nc, cfg: cfg, subject: cfg.SubjectPrefix + "." + nuid.Next(), held: make(map[uint64]*heldReply)}
	sub, err := nc.Subscribe(r.subject+".*", r.onMore)
	if err != nil {
		return nil, fmt.Errorf("wire: responder: %w", err)
	}
	r.sub = sub
	return r, nil
}

// PartSize returns the part body size the Responder sends.
func (r *Responder) PartSize() int { return r.cfg.PartSize }

// Respond sends hdr and body to reply: as one message when it fits, in
// parts when it fits one window, else its first window, the rest as the
// requester asks for it. body must not be modified afterwards (it may be
// held for HoldTTL); hdr is neither modified nor kept (the caller may
// reuse it once Respond returns).
func (r *Responder) Respond(reply string, hdr nats.Header, body []byte) error {
	if len(body) <= r.cfg.Window {
		return Publish(r.nc, &nats.Msg{Subject: reply, Header: hdr, Data: body}, r.cfg.PartSize)
	}
	now := time.Now()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nats.ErrConnectionClosed
	}
	for id, h := range r.held {
		if now.After(h.expires) {
			delete(r.held, id)
		}
	}
	if len(r.held) >= r.cfg.MaxHeld {
		r.mu.Unlock()
		return fmt.Errorf("%w: %d (MaxHeld)", ErrTooManyHeld, r.cfg.MaxHeld)
	}
	r.nextID++
	id := r.nextID
	// The header is copied: the caller may reuse its own once Respond
	// returns, while the reply is held.
	own := make(nats.Header, len(hdr))
	for k, v := range hdr {
		own[k] = append([]string(nil), v...)
	}
	h := &heldReply{reply: reply, hdr: own, body: body, expires: now.Add(r.cfg.HoldTTL)}
	r.held[id] = h
	r.mu.Unlock()
	more := r.subject + "." + strconv.FormatUint(id, 10)
	last, err := r.sendWindow(h, 0, more)
	if err != nil || last {
		r.drop(id)
	}
	return err
}

// onMore serves a request for the next window of a held reply.
func (r *Responder) onMore(m *nats.Msg) {
	id, err := strconv.ParseUint(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], 10, 64)
	from, err2 := strconv.Atoi(string(m.Data))
	r.mu.Lock()
	h := r.held[id]
	if h != nil {
		h.expires = time.Now().Add(r.cfg.HoldTTL)
	}
	r.mu.Unlock()
	switch {
	case err != nil || err2 != nil || m.Reply == "":
		return // not from a Request: nobody to answer
	case h == nil:
		_ = r.nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{HeaderPartError: {"no such reply held (expired or unknown)"}}})
		return
	}
	last, err := r.sendWindow(h, from, m.Subject)
	if err != nil || last {
		r.drop(id)
	}
}

// sendWindow sends the parts of h's window starting at part from; the
// last part carries HeaderPartMore unless it is the reply's last part.
func (r *Responder) sendWindow(h *heldReply, from int, more string) (last bool, err error) {
	size := r.cfg.PartSize
	n := Parts(len(h.body), size)
	k := max(1, r.cfg.Window/size)
	if from < 0 || from >= n {
		return true, fmt.Errorf("%w: window from part %d of %d", ErrBadPart, from, n)
	}
	to := min(n, from+k)
	hdr := make(nats.Header, len(h.hdr)+3)
	for k, v := range h.hdr {
		hdr[k] = v
	}
	hdr[HeaderPartBytes] = []string{strconv.Itoa(len(h.body))}
	idx := []string{""}
	hdr[HeaderPart] = idx
	of := "/" + strconv.Itoa(n)
	part := &nats.Msg{Subject: h.reply, Header: hdr}
	for i := from; i < to; i++ {
		idx[0] = strconv.Itoa(i) + of
		if i == to-1 && to < n {
			hdr[HeaderPartMore] = []string{more}
		}
		part.Data = h.body[i*size : min(len(h.body), (i+1)*size)]
		if err := r.nc.PublishMsg(part); err != nil {
			return true, fmt.Errorf("wire: part %d of %d of %d bytes: %w", i, n, len(h.body), err)
		}
	}
	return to == n, nil
}

func (r *Responder) drop(id uint64) {
	r.mu.Lock()
	delete(r.held, id)
	r.mu.Unlock()
}

// Held reports how many replies are held for their requesters.
func (r *Responder) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// Close stops taking window requests (one the server delivered already is
// answered that its reply is gone) and drops every held reply; later
// Responds of a reply larger than a window fail. Idempotent.
func (r *Responder) Close() {
	r.mu.Lock()
	r.closed = true
	clear(r.held)
	r.mu.Unlock()
	// Drain, not Unsubscribe: a window request the server delivered
	// before it saw the unsubscribe is still handled, and answered that its
	// reply is gone, instead of being dropped while its requester waits.
	_ = r.sub.Drain()
}
