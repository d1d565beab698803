package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Part headers (see the package comment).
const (
	HeaderPart      = "Tc-Part"       // "i/n": part i (0-based) of n
	HeaderPartBytes = "Tc-Part-Bytes" // the whole body's length
)

// HeaderRoom is what PartSize leaves of a connection's max payload for the
// headers of a part: the original message's (a few short Tc-* values) and
// the two part headers.
const HeaderRoom = 4096

// MinPartSize is the smallest part body PartSize returns, whatever the max
// payload.
const MinPartSize = 1024

// DefaultMaxOpen is Assembler.MaxOpen's value when it is 0.
const DefaultMaxOpen = 8

// Errors of the parts transport.
var (
	// ErrPartLost: a part was missing or out of order; the message it
	// belonged to was discarded whole.
	ErrPartLost = errors.New("wire: a part of a message was lost")
	// ErrBadPart: the part headers are malformed or contradict each other.
	ErrBadPart = errors.New("wire: malformed message part")
	// ErrTooLarge: the message is larger than the receiver accepts
	// (Assembler.Max).
	ErrTooLarge = errors.New("wire: message larger than the receiver's limit")
)

// Publisher sends one NATS message; *nats.Conn satisfies it. PublishMsg
// must copy the data and headers before it returns (nats.go does), since
// Publish reuses one part message.
type Publisher interface {
	PublishMsg(msg *nats.Msg) error
}

// PartSize returns the largest part body for a connection whose max
// payload is maxPayload bytes.
func PartSize(maxPayload int64) int {
	return max(MinPartSize, int(maxPayload)-HeaderRoom)
}

// Parts returns how many messages Publish sends for a body of n bytes.
func Parts(n, size int) int {
	if n <= size {
		return 1
	}
	return (n + size - 1) / size
}

// Publish sends msg through pub: as is when its body is at most size bytes
// (the common case: no allocation, no extra header), else in parts of at
// most size bytes each. msg and its header are not modified. On an error
// the parts already sent stay sent; a receiver discards the incomplete
// message (ErrPartLost) when the next message on the subject arrives, or
// gives up waiting.
func Publish(pub Publisher, msg *nats.Msg, size int) error {
	if len(msg.Data) <= size {
		return pub.PublishMsg(msg)
	}
	size = max(size, 1)
	n := Parts(len(msg.Data), size)
	h := make(nats.Header, len(msg.Header)+2)
	for k, v := range msg.Header {
		h[k] = v
	}
	h[HeaderPartBytes] = []string{strconv.Itoa(len(msg.Data))}
	idx := []string{""}
	h[HeaderPart] = idx
	of := "/" + strconv.Itoa(n)
	part := &nats.Msg{Subject: msg.Subject, Reply: msg.Reply, Header: h}
	for i := 0; i < n; i++ {
		idx[0] = strconv.Itoa(i) + of
		part.Data = msg.Data[i*size : min(len(msg.Data), (i+1)*size)]
		if err := pub.PublishMsg(part); err != nil {
			return fmt.Errorf("wire: part %d of %d of %d bytes on %s: %w", i, n, len(msg.Data), msg.Subject, err)
		}
	}
	return nil
}

// Assembler joins parts back into messages, for one subscription. The
// parts of one message arrive consecutively on their subject, but a
// wildcard subscription may interleave other subjects' messages between
// them: assembly is per subject, at most MaxOpen subjects at a time.
//
// Max and MaxOpen are set before the first Add and not changed after.
type Assembler struct {
	// Max is the largest body assembled; a message announcing more is
	// refused with ErrTooLarge. Zero means no limit (the caller bounds
	// it otherwise).
	Max int
	// MaxOpen bounds the subjects with a message in assembly; a first part
	// beyond it is refused (ErrPartLost). Zero means DefaultMaxOpen.
	MaxOpen int

	open map[string]*partial // by subject; nil until a first part arrives
}

type partial struct {
	subject, reply string
	hdr            nats.Header // the first part's; the message's but for the part headers
	sub            *nats.Subscription
	buf            []byte
	n, next        int
	total          int
}

// Add takes the next message of the subscription. It returns the whole
// message — msg itself when it was not in parts, a new message whose Data
// is the joined body and whose header is the original one otherwise — or
// nil while parts are still to come. A non-nil error reports a message that
// was discarded (a part lost or malformed, or too large); the returned
// message, when not nil, is still good: a whole message that arrives while
// a message of the same subject is in assembly is returned, and the one in
// assembly is discarded (its remaining parts were lost).
//
// The returned message's Data belongs to the caller; it aliases msg.Data
// when msg was whole.
func (a *Assembler) Add(msg *nats.Msg) (*nats.Msg, error) {
	pv := msg.Header[HeaderPart] // a nil header has no parts
	if len(pv) == 0 {
		if len(a.open) == 0 {
			return msg, nil
		}
		if _, ok := a.open[msg.Subject]; ok {
			delete(a.open, msg.Subject)
			return msg, fmt.Errorf("%w: a whole message on %s came before the last part of the one before it", ErrPartLost, msg.Subject)
		}
		return msg, nil
	}
	i, n, total, err := parsePart(pv[0], msg.Header.Get(HeaderPartBytes))
	if err != nil {
		a.drop(msg.Subject)
		return nil, err
	}
	p := a.open[msg.Subject]
	if i == 0 {
		if p != nil {
			err = fmt.Errorf("%w: a new message on %s began before the last part of the one before it", ErrPartLost, msg.Subject)
		}
		switch {
		case a.Max > 0 && total > a.Max:
			a.drop(msg.Subject)
			return nil, fmt.Errorf("%w: %d bytes on %s (limit %d)", ErrTooLarge, total, msg.Subject, a.Max)
		case p == nil && len(a.open) >= a.maxOpen():
			return nil, fmt.Errorf("%w: more than %d messages in assembly at once", ErrPartLost, a.maxOpen())
		}
		if a.open == nil {
			a.open = make(map[string]*partial)
		}
		buf := make([]byte, 0, total)
		a.open[msg.Subject] = &partial{subject: msg.Subject, reply: msg.Reply, hdr: msg.Header, sub: msg.Sub,
			buf: append(buf, msg.Data...), n: n, next: 1, total: total}
		return nil, err
	}
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: part %d of %d on %s without its first part", ErrPartLost, i, n, msg.Subject)
	case i != p.next || n != p.n || total != p.total || !sameHeaders(p.hdr, msg.Header):
		a.drop(msg.Subject)
		return nil, fmt.Errorf("%w: part %d of %d on %s where part %d of %d was due", ErrPartLost, i, n, msg.Subject, p.next, p.n)
	case len(p.buf)+len(msg.Data) > p.total:
		a.drop(msg.Subject)
		return nil, fmt.Errorf("%w: parts on %s longer than the %d bytes announced", ErrBadPart, msg.Subject, p.total)
	}
	p.buf = append(p.buf, msg.Data...)
	p.next++
	if p.next < p.n {
		return nil, nil
	}
	delete(a.open, msg.Subject)
	if len(p.buf) != p.total {
		return nil, fmt.Errorf("%w: parts on %s hold %d bytes, %d announced", ErrBadPart, msg.Subject, len(p.buf), p.total)
	}
	h := make(nats.Header, len(p.hdr))
	for k, v := range p.hdr {
		if k != HeaderPart && k != HeaderPartBytes && k != HeaderPartMore {
			h[k] = v
		}
	}
	return &nats.Msg{Subject: p.subject, Reply: p.reply, Header: h, Data: p.buf, Sub: p.sub}, nil
}

// Pending reports whether a message is in assembly.
func (a *Assembler) Pending() bool { return len(a.open) > 0 }

// PendingOn reports whether a message on subject is in assembly: its first
// part was taken and its last is still to come.
func (a *Assembler) PendingOn(subject string) bool {
	_, ok := a.open[subject]
	return ok
}

func (a *Assembler) drop(subject string) {
	delete(a.open, subject)
}

func (a *Assembler) maxOpen() int {
	if a.MaxOpen > 0 {
		return a.MaxOpen
	}
	return DefaultMaxOpen
}

// parsePart parses "i/n" and the announced length.
func parsePart(part, bytes string) (i, n, total int, err error) {
	is, ns, ok := strings.Cut(part, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	total, err3 := strconv.Atoi(bytes)
	if !ok || err1 != nil || err2 != nil || err3 != nil || n < 2 || i < 0 || i >= n || total < n {
		return 0, 0, 0, fmt.Errorf("%w: %s=%q %s=%q", ErrBadPart, HeaderPart, trunc(part), HeaderPartBytes, trunc(bytes))
	}
	return i, n, total, nil
}

// sameHeaders reports whether two parts carry the same headers but for
// their index and the window header (responder.go).
func sameHeaders(a, b nats.Header) bool {
	return countOwn(a) == countOwn(b) && eachOwn(a, func(k string, v []string) bool { return slices.Equal(v, b[k]) })
}

func partHeader(k string) bool { return k == HeaderPart || k == HeaderPartMore }

func countOwn(h nats.Header) int {
	n := 0
	for k := range h {
		if !partHeader(k) {
			n++
		}
	}
	return n
}

func eachOwn(h nats.Header, fn func(k string, v []string) bool) bool {
	for k, v := range h {
		if !partHeader(k) && !fn(k, v) {
			return false
		}
	}
	return true
}

// Request publishes a request with body on subject and returns the whole
// reply, assembled from its parts, of at most max bytes (0: no limit). It
// waits until ctx ends. The reply goes to an inbox subscribed for this
// request alone (nc.NewInbox, so a custom inbox prefix is kept), since a
// reply in parts is several messages; a Requester shares one subscription
// between many requests. Errors: nats.ErrNoResponders when nothing listens
// on subject, ctx.Err() when ctx ended first, ErrPartLost (also when the
// responder went away between two windows: a new request may succeed),
// ErrBadPart or ErrTooLarge for a reply that could not be assembled, or
// the connection's error. A reply that carries an error (in its headers)
// is the caller's to read.
func Request(ctx context.Context, nc *nats.Conn, subject string, body []byte, max int) (*nats.Msg, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("wire: subscribe reply inbox: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The responder sends one reply; what it may hold is bounded by max,
	// not by the subscription's default pending limits.
	_ = sub.SetPendingLimits(-1, -1)
	return request(ctx, nc, subject, inbox, body, max, sub.NextMsgWithContext)
}

// request publishes the request with its replies to inbox, which next
// reads, and assembles the reply (Request).
func request(ctx context.Context, nc *nats.Conn, subject, inbox string, body []byte, max int, next func(context.Context) (*nats.Msg, error)) (*nats.Msg, error) {
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: body}); err != nil {
		return nil, fmt.Errorf("wire: request on %s: %w", subject, err)
	}
	asm := Assembler{Max: max, MaxOpen: 1}
	asked := false // a window was asked for: the responder was there
	for {
		m, err := next(ctx)
		if asked && errors.Is(err, nats.ErrNoResponders) {
			// The responder went away between two windows (its process
			// stopped): what arrived is lost, a new request may succeed.
			return nil, fmt.Errorf("%w: the responder is gone: %w", ErrPartLost, err)
		}
		if err != nil {
			return nil, err
		}
		if e := m.Header.Get(HeaderPartError); e != "" {
			return nil, fmt.Errorf("%w: %s", ErrPartLost, trunc(e))
		}
		// A whole message after parts is the responder's word (an error
		// reply sent when its parts could not all be sent): it wins.
		whole, err := asm.Add(m)
		switch {
		case whole != nil:
			return whole, nil
		case err != nil:
			return nil, err
		}
		// The last part of a window: ask for the next (responder.go).
		if more := m.Header.Get(HeaderPartMore); more != "" {
			i, _, _, _ := parsePart(m.Header.Get(HeaderPart), m.Header.Get(HeaderPartBytes))
			if err := nc.PublishMsg(&nats.Msg{Subject: more, Reply: inbox, Data: strconv.AppendInt(nil, int64(i+1), 10)}); err != nil {
				return nil, fmt.Errorf("wire: ask for the next window: %w", err)
			}
			asked = true
		}
	}
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
