package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/wire"
)

// Bounds of GET /v1/deadletters: a page holds ?limit= dead letters
// (default defaultDeadLetters, at most maxDeadLetters), each with at most
// deadLetterData bytes of the rejected input.
const (
	defaultDeadLetters = 100
	maxDeadLetters     = 1000
	deadLetterData     = 4096
)

// DeadLetter is one entry of GET /v1/deadletters: input the pipeline
// rejected, with its reason (pipeline's Tc-Error-* headers).
type DeadLetter struct {
	Seq       uint64    `json:"seq"`              // in the dead-letter stream: the page cursor
	Thread    string    `json:"thread,omitempty"` // absent when the subject named no valid thread
	Kind      string    `json:"kind"`             // decode, invalid, subject, too-big
	Error     string    `json:"error"`
	EventSeq  uint64    `json:"eventSeq,omitempty"` // event stream seq of the offending message
	Index     *int      `json:"index,omitempty"`    // its place in a batch
	Time      time.Time `json:"time"`
	Bytes     int       `json:"bytes"` // size of the rejected input
	Data      string    `json:"data"`  // its first deadLetterData bytes as text
	Truncated bool      `json:"truncated,omitempty"`
}

// deadLetters serves GET /v1/deadletters: the token's tenant's dead letters,
// oldest first, from the dead-letter stream (wire.DefaultDeadLetters, dlq.>),
// ?limit= at a time after ?after= (the previous page's next). A token
// limited to some threads sees theirs only.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	c, ok := s.authorize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, ok := s.pageLimit(w, q, defaultDeadLetters, maxDeadLetters)
	if !ok {
		return
	}
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.denyDetail(w, http.StatusBadRequest, "bad_cursor", "after must be the next cursor of an earlier page")
			return
		}
		after = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.hub.cfg.SnapshotTimeout)
	defer cancel()
	out, more, err := s.readDeadLetters(ctx, c, after, limit)
	if err != nil {
		s.log.Warn("fanout: dead letter read failed", "tenant", c.Tenant, "err", err)
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	page := struct {
		DeadLetters []DeadLetter `json:"deadLetters"`
		Next        string       `json:"next,omitempty"`
	}{DeadLetters: out}
	if more {
		page.Next = strconv.FormatUint(out[len(out)-1].Seq, 10)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

// readDeadLetters reads up to limit dead letters of c's tenant after stream
// seq after, through an ephemeral consumer filtered on dlq.<tenant>.>.
func (s *Server) readDeadLetters(ctx context.Context, c auth.Claims, after uint64, limit int) ([]DeadLetter, bool, error) {
	out := []DeadLetter{}
	if s.cfg.DeadLetters == "" {
		return out, false, nil
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, false, err
	}
	cc := jetstream.ConsumerConfig{
		Name:              "tcdlq_" + nuid.Next(),
		FilterSubject:     wire.DLQPrefix + "." + c.Tenant + ".>",
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 30 * time.Second, // a backstop: deleted below
	}
	switch {
	case after == math.MaxUint64:
		return out, false, nil // no seq comes after it
	case after > 0:
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := js.CreateConsumer(ctx, s.cfg.DeadLetters, cc)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, s.cfg.DeadLetters, cc.Name)
	}()
	left := cons.CachedInfo().NumPending
	all := c.AllThreads()
	for left > 0 && len(out) <= limit {
		batch, err := cons.FetchNoWait(int(min(left, uint64(limit+1-len(out)))))
		if err != nil {
			return nil, false, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			left = meta.NumPending
			dl := DeadLetter{Seq: meta.Sequence.Stream, Time: meta.Timestamp.UTC(), Bytes: len(m.Data()),
				Kind: m.Headers().Get(wire.HeaderErrorKind), Error: m.Headers().Get(wire.HeaderError)}
			tok := m.Subject()[strings.LastIndexByte(m.Subject(), '.')+1:]
			if id, err := wire.DecodeThread(tok); err == nil && tok != "_" {
				dl.Thread = id
			}
			if !all && (dl.Thread == "" || !c.AllowsThread(dl.Thread)) {
				continue
			}
			dl.EventSeq, _ = strconv.ParseUint(m.Headers().Get(wire.HeaderSeq), 10, 64)
			if v := m.Headers().Get(wire.HeaderEventIndex); v != "" {
				if i, err := strconv.Atoi(v); err == nil {
					dl.Index = &i
				}
			}
			data := m.Data()
			if len(data) > deadLetterData {
				data, dl.Truncated = data[:deadLetterData], true
			}
			dl.Data = strings.ToValidUTF8(string(data), string(utf8.RuneError))
			out = append(out, dl)
		}
		if err := batch.Error(); err != nil {
			return nil, false, err
		}
		if n == 0 {
			info, err := cons.Info(ctx)
			if err != nil {
				return nil, false, err
			}
			if left = info.NumPending; left == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return nil, false, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, left > 0, nil
}
