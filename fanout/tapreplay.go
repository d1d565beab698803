package fanout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/wire"
)

// tapSince is where a replay of the tap stream starts: a stream seq (from
// seq on) or, when seq is 0, a time (the first message stored at or after
// it).
type tapSince struct {
	seq uint64
	at  time.Time
}

// parseTapSince reads ?since= (an RFC 3339 time, or a tap stream seq) and
// Last-Event-ID (the id of the last message a replay delivered, a tap
// stream seq or 0, tapResume's id for a message delivered while the
// stream's first message was a part of one in assembly: the replay
// resumes after it, and it wins over ?since=). ok is false when neither is
// given.
func parseTapSince(since, lastEventID string) (tapSince, bool, error) {
	if lastEventID != "" {
		n, err := strconv.ParseUint(lastEventID, 10, 64)
		if err != nil || n == math.MaxUint64 {
			return tapSince{}, false, fmt.Errorf("Last-Event-ID: %q is not a tap stream seq", truncateID(lastEventID))
		}
		return tapSince{seq: n + 1}, true, nil
	}
	if since == "" {
		return tapSince{}, false, nil
	}
	if n, err := strconv.ParseUint(since, 10, 64); err == nil {
		if n == 0 {
			return tapSince{}, false, errors.New("since: a tap stream seq starts at 1")
		}
		return tapSince{seq: n}, true, nil
	}
	at, err := time.Parse(time.RFC3339Nano, since)
	if err != nil {
		return tapSince{}, false, fmt.Errorf("since: %q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a tap stream seq", truncateID(since))
	}
	return tapSince{at: at}, true, nil
}

func truncateID(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// tapReplay serves GET /v1/tap?since=: the tenant's part of the tap stream
// (Config.TapStream) from since on, then live, through one ordered
// consumer filtered on the tenant's tap subjects (one per ?types= entry):
// the replay and the live part are the same consumer, so there is neither
// a gap nor a duplicate where one becomes the other. Each SSE message has
// a tap stream seq as its id (tapResume), so a client reconnecting with
// Last-Event-ID resumes after it. The consumer pulls at most tapPullBatch
// messages ahead and the handler holds at most tapPending: a reader that
// cannot keep up is not cut, the stream waits for it (the messages stay in
// the tap stream).
func (s *Server) tapReplay(w http.ResponseWriter, r *http.Request, c auth.Claims, types []string, since tapSince, ndjson bool) {
	if s.cfg.TapStream == "" {
		s.denyDetail(w, http.StatusNotFound, "tap_not_durable", "this node keeps no tap stream: only the live tap (without since) is served")
		return
	}
	filters := []string{wire.TapPrefix + "." + c.Tenant + ".>"}
	if len(types) > 0 {
		filters = filters[:0]
		for _, t := range types {
			filters = append(filters, wire.TapPrefix+"."+c.Tenant+"."+t+".*")
		}
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: since.seq}
	if since.seq == 0 {
		at := since.at
		occ.DeliverPolicy, occ.OptStartSeq, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &at
	}
	end, ok := s.beginStream(w, c.Tenant, "", true)
	if !ok {
		return
	}
	defer end()
	js, err := jetstream.New(s.nc)
	if err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.hub.cfg.SnapshotTimeout)
	cons, err := js.OrderedConsumer(ctx, s.cfg.TapStream, occ)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s.denyDetail(w, http.StatusNotFound, "tap_not_durable", "the tap stream "+s.cfg.TapStream+" does not exist: only the live tap (without since) is served")
		return
	}
	if err != nil {
		s.log.Warn("fanout: tap replay consumer", "tenant", c.Tenant, "err", err)
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(tapPullBatch))
	if err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	// The pump moves messages from the consumer to ch; this handler owns
	// it: Stop ends its Next, and the handler waits for it to return. The
	// stream seq travels beside the message, not in its header: the parts
	// of a message must keep the same headers to be joined.
	ch := make(chan tapPart, tapPending)
	done := make(chan struct{})
	pumpCtx, stopPump := context.WithCancel(r.Context())
	go func() {
		defer close(done)
		for {
			m, err := it.Next()
			if err != nil {
				return // stopped (or the consumer failed: the stream ends at the next heartbeat's write)
			}
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			select {
			case ch <- tapPart{&nats.Msg{Subject: m.Subject(), Data: m.Data(), Header: m.Headers()}, meta.Sequence.Stream}:
			case <-pumpCtx.Done():
				return
			}
		}
	}()
	defer func() {
		stopPump()
		it.Stop()
		<-done
	}()
	all := c.AllThreads()
	parts := wire.Assembler{Max: s.hub.cfg.MaxMessageBytes}
	var resume tapResume
	streamMsgs(s, w, r, ch, ndjson, s.cfg.Verifier.Deadline(c), nil, func(part tapPart, dst []byte) []byte {
		m, err := parts.Add(part.msg)
		if err != nil {
			s.m.BadTap.Inc()
		}
		id := resume.add(&parts, part)
		if m == nil {
			return dst
		}
		if !all {
			thread, err := wire.DecodeThread(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
			if err != nil || !c.AllowsThread(thread) {
				return dst
			}
		}
		if ndjson {
			dst = append(dst, m.Data...)
			return append(dst, '\n')
		}
		dst = append(dst, "id: "...)
		dst = strconv.AppendUint(dst, id, 10)
		dst = append(dst, '\n')
		return appendData(dst, m.Data)
	})
}

// tapPart is a message of the tap stream (whole, or a part of one) and
// its stream seq.
type tapPart struct {
	msg *nats.Msg
	seq uint64
}

// tapResume gives each message a replay delivers its SSE id: the seq
// after which a replay resumes (Last-Event-ID) with nothing lost. That is
// the seq of the part just read, but for a message in assembly: its parts
// before that seq would not be replayed, and the message would be lost
// whole, so the id stays below its first part until it is delivered or
// discarded. Messages of other subjects come between the parts of one in
// the tap stream (every shard publishes into it), so a message delivered
// while another is in assembly gets an id below its own seq: resuming after
// it replays it again, with the one in assembly. A resume loses nothing,
// repeats nothing when no message was in assembly, and never starts inside
// a message. Ids never decrease.
type tapResume struct {
	first map[string]uint64 // by subject: the seq of the first part of the message in assembly
}

// add records part, which parts has just taken, and returns the id of a
// message delivered with it.
func (r *tapResume) add(parts *wire.Assembler, part tapPart) uint64 {
	subj := part.msg.Subject
	switch {
	case !parts.PendingOn(subj):
		delete(r.first, subj)
	case strings.HasPrefix(part.msg.Header.Get(wire.HeaderPart), "0/"):
		if r.first == nil {
			r.first = make(map[string]uint64)
		}
		r.first[subj] = part.seq // a new message (one before it on subj, unfinished, was discarded)
	}
	id := part.seq
	for _, seq := range r.first { // at most the Assembler's MaxOpen entries
		id = min(id, seq-1)
	}
	return id
}

// tapPullBatch is how many messages a tap replay's consumer pulls ahead.
const tapPullBatch = 256
