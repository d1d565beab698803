package pipeline

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/wire"
)

// NOTE: everything a shard sends on core NATS — frames, snapshot replies,
// the tap, dead letters — leaves through send, which carries a body larger
// than one NATS message in parts (package wire) and never ignores an
// error: a message that could not be sent is counted
// (PublishErrors{what}) and logged, at most once a second per shard and
// kind, with how many were suppressed. Snapshot replies go through
// respondParts, which also tells the requester.

// What a shard sends (label values of Metrics.PublishErrors and Parted).
const (
	sendFrame    = "frame"
	sendSnapshot = "snapshot"
	sendTap      = "tap"
	sendDLQ      = "dlq"
)

// partSizeOf returns the part body size for pub: from its max payload when
// it is a connection (the server's limit), else from the largest message
// the stream accepts.
func partSizeOf(pub Publisher, cfg *Config) int {
	if c, ok := pub.(interface{ MaxPayload() int64 }); ok && c.MaxPayload() > 0 {
		return wire.PartSize(c.MaxPayload())
	}
	return wire.PartSize(int64(cfg.MaxMsgSize))
}

// send publishes msg (in parts when large) and accounts for a failure.
func (s *shard) send(what string, msg *nats.Msg) error {
	return s.sendVia(s.pub, what, msg)
}

// sendVia is send through pub.
func (s *shard) sendVia(pub Publisher, what string, msg *nats.Msg) error {
	if len(msg.Data) > s.partSize {
		s.m.Parted.WithLabelValues(what).Inc()
	}
	err := wire.Publish(pub, msg, s.partSize)
	if err != nil {
		s.m.PublishErrors.WithLabelValues(what).Inc()
		s.sendLog.warn(s.log, what, msg.Subject, len(msg.Data), err)
	}
	return err
}

// respondParts answers req with hdr and body, in parts when body is larger
// than one message, window by window when it is larger than a window
// (wire.Responder, which holds body until the requester fetched it: body
// must not be modified afterwards). Every snapshot reply is sent through it
// (a reply's content is the caller's; the transport is this). hdr and body
// are not modified, so one encoding may answer many requests. When the reply
// cannot be sent, the requester is sent a small wire.SnapErrUnsent reply
// instead, so that it fails at once rather than waiting for its timeout;
// the error returned is the first failure. It runs on the shard goroutine.
func (s *shard) respondParts(req *nats.Msg, hdr nats.Header, body []byte) error {
	if req.Reply == "" {
		return nats.ErrMsgNoReply
	}
	var err error
	if s.resp == nil {
		// The shard's own message, reused (PublishMsg keeps no reference).
		s.replyMsg = nats.Msg{Subject: req.Reply, Header: hdr, Data: body}
		err = s.send(sendSnapshot, &s.replyMsg)
		s.replyMsg = nats.Msg{}
	} else {
		if len(body) > s.resp.PartSize() {
			s.m.Parted.WithLabelValues(sendSnapshot).Inc()
		}
		if err = s.resp.Respond(req.Reply, hdr, body); err != nil {
			s.m.PublishErrors.WithLabelValues(sendSnapshot).Inc()
			s.sendLog.warn(s.log, sendSnapshot, req.Reply, len(body), err)
		}
	}
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		snapError(req, wire.SnapErrUnsent, err.Error())
	}
	return err
}

// sendLog rate-limits the send failure logs of one shard: at most one line
// per kind per second, with the count of those not logged. The shard
// goroutine is its only user, but the snapshot "busy" path may log from a
// NATS callback, hence the atomics.
type sendLog struct {
	last       [4]atomic.Int64 // Unix ns of the last line, per kind
	suppressed [4]atomic.Int64
}

func sendIndex(what string) int {
	switch what {
	case sendFrame:
		return 0
	case sendSnapshot:
		return 1
	case sendTap:
		return 2
	}
	return 3
}

func (l *sendLog) warn(log *slog.Logger, what, subject string, n int, err error) {
	i := sendIndex(what)
	now := time.Now().UnixNano()
	last := l.last[i].Load()
	if now-last < int64(time.Second) || !l.last[i].CompareAndSwap(last, now) {
		l.suppressed[i].Add(1)
		return
	}
	log.Warn("pipeline: could not send", "what", what, "subject", subject, "bytes", n, "err", err,
		"suppressed", l.suppressed[i].Swap(0))
}
