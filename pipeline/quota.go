package pipeline

// NOTE: quotas at the NATS ingest. Agents publish straight to JetStream, so
// an event over its tenant's quota is already stored when a shard sees it:
// the shard can only shed it — not apply it, dead-letter it with kind
// wire.ErrKindQuota and the quota in wire.HeaderQuota, count it in QuotaShed, and
// count a warning in the thread's view at its seq (the view stays the fold
// of the applied events, and says that something was left out).
//
// What is shed. An event is checked against its tenant's events/s and
// bytes/s in a quota.Window per partition, by the message's stored
// timestamp (the server's, in the delivery's reply subject): durable and
// the same on every delivery. Only content may be shed at the window's
// budget; structure (run, step, message, tool call and reasoning starts
// and ends, errors) passes up to twice it, so that shedding degrades a
// thread instead of breaking its protocol state; past twice it everything
// is shed, and is shed before it is decoded (Window.Exhausted), so a flood
// costs no decoding. A tenant whose retained events are over quota (Config.Retained)
// has every event shed.
//
// Replay. A partition's window sees every message of the partition once,
// in stream order — also the ones a replay skips because a checkpoint
// covers them (they are decoded and counted, not applied) — so a replay
// makes the first pass's decisions again, with one exception: the window
// in progress where the replay starts (its ack floor) is counted from
// there, so in that one second a replay may apply events of a thread that
// the first pass shed, never the reverse. The retained check reads a count
// that changes with time, so it is not replay-stable.

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// msgQuota is the quota state of the message being handled.
type msgQuota struct {
	lim      quota.Limits
	rated    bool      // lim has a rate: the window decides
	at       time.Time // the message's stored timestamp (when rated)
	retained error     // the tenant's retained events are over quota
}

// beginQuota looks up the quotas of tenant's message msg.
func (s *shard) beginQuota(tenant string, msg jetstream.Msg) {
	q := &s.quota
	q.lim = s.cfg.Quota.For(tenant)
	q.rated = q.lim.EventsPerSec > 0 || q.lim.BytesPerSec > 0
	q.retained = nil
	if s.cfg.Retained != nil {
		q.retained = s.cfg.Retained(tenant)
	}
	if q.rated {
		q.at = storedTime(msg, s.stored, s.now)
	}
}

// admit decides whether the decoded event s.ev (n bytes) of t is applied:
// 0, or the quota it is shed over.
func (s *shard) admit(t *hotThread, n int) quota.Kind {
	q := &s.quota
	if q.retained != nil {
		return quota.KindRetained
	}
	if !q.rated {
		return 0
	}
	k, ok := t.part.win.Admit(q.lim, t.key.tenant, q.at, 1, int64(n), structural(s.ev.Type))
	if ok {
		return 0
	}
	return k
}

// exhausted returns the quota an event of n bytes of t is shed over
// whatever its type (0: none), before it is decoded: under a flood, shed
// events cost no decode. It refuses exactly where admit would refuse a
// structural event, so decisions are unchanged.
func (s *shard) exhausted(t *hotThread, n int) quota.Kind {
	q := &s.quota
	if q.retained != nil {
		return quota.KindRetained
	}
	if !q.rated {
		return 0
	}
	return t.part.win.Exhausted(q.lim, t.key.tenant, q.at, int64(n))
}

// countSkipped shows the window the events of a message a replay skips,
// so that its counts are those of the first pass.
func (s *shard) countSkipped(t *hotThread, data []byte) {
	if !s.quota.rated {
		return
	}
	for {
		line, rest, ok := history.NextEvent(data)
		if !ok {
			return
		}
		if s.exhausted(t, len(line)) == 0 && s.dec.Decode(line, &s.ev) == nil {
			s.admit(t, len(line))
		}
		data = rest
	}
}

// shed leaves the event line out of t's view: a dead letter naming the
// quota, the metric, and a warning in the view at seq.
func (s *shard) shed(t *hotThread, seq uint64, line []byte, idx int, k quota.Kind) {
	reason := "quota: tenant over its " + k.String() + " quota; event not applied"
	s.m.QuotaShed.WithLabelValues(s.m.tenantLabels.Label(t.key.tenant), k.String()).Inc()
	s.deadLetter(t.key.tenant, t.key.token, line, wire.ErrKindQuota, reason, seq, idx, k.String())
	t.th.Warn(seq, reducer.Warning{Code: "quota-" + k.String(), Seq: seq, Message: reason})
}

// structural reports the event types whose loss would break the protocol
// state of the events after them.
func structural(t codec.Type) bool {
	switch t {
	case codec.TypeTextMessageContent, codec.TypeTextMessageChunk, codec.TypeToolCallArgs, codec.TypeToolCallChunk,
		codec.TypeStateSnapshot, codec.TypeStateDelta, codec.TypeMessagesSnapshot, codec.TypeActivitySnapshot,
		codec.TypeActivityDelta, codec.TypeRaw, codec.TypeCustom, codec.TypeReasoningMessageContent,
		codec.TypeReasoningMessageChunk, codec.TypeReasoningEncryptedValue:
		return false
	}
	return true
}

// storedTime is msg's stored timestamp: stored, when the shard read it
// from the reply subject (ackReplyTime, as nats.go's Metadata reads it);
// else from its metadata; else now.
func storedTime(msg jetstream.Msg, stored int64, now time.Time) time.Time {
	if stored > 0 {
		return time.Unix(0, stored)
	}
	if meta, err := msg.Metadata(); err == nil {
		return meta.Timestamp
	}
	return now
}

// ackReplyTime returns the <tm> token of a JetStream ack subject.
func ackReplyTime(reply string) (int64, bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return 0, false
	}
	var skip int // tokens after the prefix before <tm>
	switch tokens := strings.Count(reply, ".") + 1; {
	case tokens == 9:
		skip = 5
	case tokens >= 11:
		skip = 7
	default:
		return 0, false
	}
	rest := reply[len(prefix):]
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	tm, _, _ := strings.Cut(rest, ".")
	ns, err := strconv.ParseInt(tm, 10, 64)
	return ns, err == nil && ns > 0
}
