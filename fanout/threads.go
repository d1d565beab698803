package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/wire"
)

// threadView serves GET /v1/threads/{thread}: the current view, fetched
// with a snapshot request (so it is exactly what a joining subscriber
// would get), with its seq in Tc-Seq and as the ETag. With ?window=N the
// view is windowed to the newest N messages (wire/frame.go); the ETag
// then names the window too. With ?at=S it is the view as it was after
// event log seq S (threadViewAt, viewat.go).
func (s *Server) threadView(w http.ResponseWriter, r *http.Request) {
	c, thread, ok := s.authorizeThread(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Has("at") {
		s.threadViewAt(w, r, c, thread)
		return
	}
	window, ok := s.windowParam(w, r)
	if !ok {
		return
	}
	tok := wire.EncodeThread(thread)
	sn, err := s.hub.snapshot(r.Context(), c.Tenant, tok, window)
	if err != nil {
		s.log.Warn("fanout: view request failed", "tenant", c.Tenant, "err", err)
		s.denyUnavailable(w, err)
		return
	}
	if sn.seq == 0 {
		s.deny(w, http.StatusNotFound, "not_found")
		return
	}
	etag := `"` + strconv.FormatUint(sn.seq, 10) + `"`
	if window > 0 {
		etag = `"` + strconv.FormatUint(sn.seq, 10) + "w" + strconv.Itoa(window) + `"`
	}
	w.Header().Set("ETag", etag)
	w.Header().Set(wire.HeaderSeq, strconv.FormatUint(sn.seq, 10))
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b := append([]byte(`{"thread":`), mustJSON(thread)...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, sn.seq, 10)
	b = append(b, `,"status":`...)
	b = append(b, mustJSON(sn.status)...)
	b = append(b, `,"view":`...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+len(sn.view)+2))
	// The view is written as it is held (shared, read-only), not copied
	// into one body: a long thread's is tens of megabytes.
	if _, err := w.Write(b); err == nil {
		if _, err := w.Write(sn.view); err == nil {
			_, _ = w.Write([]byte("}\n"))
		}
	}
}

func mustJSON(v string) []byte {
	b, _ := json.Marshal(v) // a string always marshals
	return b
}

// ThreadInfo is one entry of GET /v1/threads.
//
// In the listing, Seq, Status and LastEvent are the summary the pipeline
// stored with the thread's last checkpoint (wire.HeaderStatus): as of
// Updated, so at most a checkpoint interval (or a run's end) behind the
// live view. They are absent for a checkpoint written before the pipeline
// stored a summary, and LastEvent also when no event was applied since the
// thread was last loaded.
type ThreadInfo struct {
	Thread    string     `json:"thread"`
	Updated   time.Time  `json:"updated"`             // time of the last checkpoint
	Seq       uint64     `json:"seq,omitempty"`       // seq of the checkpoint (live variant: of the frame)
	Status    string     `json:"status,omitempty"`    // reducer status ("idle", "running", "finished", "errored", ...)
	LastEvent *time.Time `json:"lastEvent,omitempty"` // time of the last event applied (its timestamp when it had one)
}

// Bounds of one page of GET /v1/threads: ?limit= defaults to
// defaultListed and may not exceed maxListed.
const (
	defaultListed = 1000
	maxListed     = 10000
)

// threadList serves GET /v1/threads: the tenant's threads from the keys of
// the views KV bucket (one key per checkpointed thread), or — with
// Accept: text/event-stream or ?live=1 — a live SSE stream of every frame's
// thread, seq and status for the tenant (view.<tenant>.*: the wildcard is
// ours, the tenant comes from the token).
func (s *Server) threadList(w http.ResponseWriter, r *http.Request) {
	c, ok := s.authorize(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("live") == "1" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.threadListLive(w, r, c, c.AllowsThread)
		return
	}
	q := r.URL.Query()
	limit, ok := s.pageLimit(w, q, defaultListed, maxListed)
	if !ok {
		return
	}
	var after *string
	if v, ok := q["after"]; ok {
		id, err := wire.DecodeThread(v[0])
		if err != nil {
			s.denyDetail(w, http.StatusBadRequest, "bad_cursor", "after must be the next cursor of an earlier page")
			return
		}
		after = &id
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.hub.cfg.SnapshotTimeout)
	defer cancel()
	out, more, err := s.listThreads(ctx, c.Tenant, c.AllowsThread, after, limit)
	if err != nil {
		s.log.Warn("fanout: thread list failed", "tenant", c.Tenant, "err", err)
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	page := struct {
		Threads []ThreadInfo `json:"threads"`
		Next    string       `json:"next,omitempty"`
	}{Threads: out}
	if more {
		page.Next = wire.EncodeThread(out[len(out)-1].Thread)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

// pageOf keeps the smallest entries of a listing (by thread id) above a
// cursor, at most limit of them plus one that tells whether there is more.
// It holds at most 2·limit+1 entries however many threads a tenant has.
type pageOf struct {
	after *string
	limit int
	out   []ThreadInfo
}

func (p *pageOf) add(info ThreadInfo) {
	if p.after != nil && info.Thread <= *p.after {
		return
	}
	p.out = append(p.out, info)
	if len(p.out) > 2*p.limit {
		p.trim()
	}
}

func (p *pageOf) trim() {
	slices.SortFunc(p.out, func(a, b ThreadInfo) int { return strings.Compare(a.Thread, b.Thread) })
	clear(p.out[min(len(p.out), p.limit+1):])
	p.out = p.out[:min(len(p.out), p.limit+1)]
}

// result returns the page and whether threads follow it.
func (p *pageOf) result() ([]ThreadInfo, bool) {
	p.trim()
	if len(p.out) > p.limit {
		return p.out[:p.limit], true
	}
	return p.out, false
}

// listThreads reads every key of the tenant (headers only) and returns the
// page of at most limit threads after the cursor (nil: from the first), in
// thread id order, and whether more follow. The bucket's keys are in no
// order, so each page reads them all; what it keeps is bounded by limit.
//
// The bucket's stream is read directly, not through a KV watcher: the
// watcher hides message headers, which is where the pipeline puts the
// thread summary. One ephemeral pull consumer (openListing), headers only
// (no record is sent), the last message of every key of the tenant: what a
// KV watcher with MetaOnly does, plus the headers. Not an ordered consumer:
// that one replaces its server-side consumer on every Fetch and deletes the
// old one from a goroutine of its own, so a listing made two and left one
// behind for a moment after it returned.
func (s *Server) listThreads(ctx context.Context, tenant string, allow func(string) bool, after *string, limit int) ([]ThreadInfo, bool, error) {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, false, err
	}
	cons, del, err := s.openListing(ctx, js, tenant)
	if err != nil {
		return nil, false, err
	}
	if cons == nil { // no bucket yet: no threads
		return []ThreadInfo{}, false, nil
	}
	// A pull consumer outlives its reader on the server (a KV watcher's
	// push consumer goes with its subscription): delete it, or every
	// listing would leave one behind for InactiveThreshold.
	defer del()
	page := pageOf{after: after, limit: limit, out: []ThreadInfo{}}
	if err := s.readListing(ctx, cons, allow, &page); err != nil {
		return nil, false, err
	}
	out, more := page.result()
	return out, more, nil
}

// listingPrefix is the subject prefix of the views bucket's keys.
func (s *Server) listingPrefix() string { return "$KV." + s.cfg.ViewsBucket + "." }

// openListing creates the listing's consumer over the tenant's keys and
// returns it with the function that deletes it. With no views bucket it
// returns a nil consumer and no error. When the create fails it returns the
// error, having deleted a consumer the server may have made before its reply
// was lost.
func (s *Server) openListing(ctx context.Context, js jetstream.JetStream, tenant string) (jetstream.Consumer, func(), error) {
	stream := "KV_" + s.cfg.ViewsBucket
	// Named here, not by the library, so that a create whose reply timed
	// out after the server made the consumer can still be deleted.
	name := "tclist_" + nuid.Next()
	del := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := js.DeleteConsumer(dctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.log.Warn("fanout: thread list consumer not deleted (the server drops it after 30s idle)", "err", err)
		}
	}
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Name:           name,
		FilterSubjects: []string{s.listingPrefix() + tenant + ".*"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:      jetstream.AckNonePolicy,
		HeadersOnly:    true,
		MemoryStorage:  true,
		Replicas:       1,
		// A backstop: listThreads deletes the consumer when the listing ends.
		InactiveThreshold: 30 * time.Second,
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			del() // the server may have made it before the reply was lost
		}
		return nil, nil, err
	}
	return cons, del, nil
}

// readListing fetches every message cons counted at its creation and adds
// the threads allow admits to page.
//
// The fetches are no-wait: the server sends what the consumer has and ends
// the request at once, where a waiting Fetch for the pending count would sit
// out its whole deadline whenever a key went away after the consumer counted
// it. The listing is of what is there when it is made.
func (s *Server) readListing(ctx context.Context, cons jetstream.Consumer, allow func(string) bool, page *pageOf) error {
	prefix := s.listingPrefix()
	left := cons.CachedInfo().NumPending
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.FetchNoWait(int(min(left, 1000)))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			left = meta.NumPending
			if info, ok := threadInfo(m.Headers(), strings.TrimPrefix(m.Subject(), prefix), meta.Timestamp, allow); ok {
				page.add(info)
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			if left, err = stillPending(ctx, cons); err != nil {
				return err
			}
		}
	}
	return nil
}

// stillPending is what readListing asks after a no-wait fetch that brought
// nothing: either the keys counted at creation are gone, or the server was
// slow to send them (the fetch also ends after a second of silence). Only
// the consumer's own count tells the two apart. It returns that count, after
// a short pause (within ctx's deadline) when it is not zero.
func stillPending(ctx context.Context, cons jetstream.Consumer) (uint64, error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	if info.NumPending == 0 {
		return 0, nil
	}
	select { // pending but not sent yet: ask again shortly, within the deadline
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(20 * time.Millisecond):
	}
	return info.NumPending, nil
}

// threadInfo is the listing entry of the views bucket's key (with its
// message's headers and time), or false for a deleted key, a key that is
// not a thread's checkpoint, or a thread the token does not cover.
func threadInfo(h nats.Header, key string, at time.Time, allow func(string) bool) (ThreadInfo, bool) {
	if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return ThreadInfo{}, false
	}
	_, tok, err := wire.ParseCheckpointKey(key)
	if err != nil {
		return ThreadInfo{}, false
	}
	id, err := wire.DecodeThread(tok)
	if err != nil || !allow(id) {
		return ThreadInfo{}, false
	}
	info := ThreadInfo{Thread: id, Updated: at.UTC(), Status: h.Get(wire.HeaderStatus)}
	info.Seq, _ = strconv.ParseUint(h.Get(wire.HeaderSeq), 10, 64)
	if ms, err := strconv.ParseInt(h.Get(wire.HeaderLastEvent), 10, 64); err == nil && ms > 0 {
		t := time.UnixMilli(ms).UTC()
		info.LastEvent = &t
	}
	return info, true
}

// threadListLive streams {"thread","seq","status","updated"} per frame.
// An entry is read from the subject and the headers alone (the thread from
// the subject's token, Tc-Seq, Tc-Status), which every part of a frame in
// parts carries: a frame's entry is written at its first part, and the
// list holds nothing of any frame whatever the threads it follows or the
// size of their frames. A whole frame without Tc-Status has its status
// read from the body.
func (s *Server) threadListLive(w http.ResponseWriter, r *http.Request, c auth.Claims, allow func(string) bool) {
	tenant := c.Tenant
	end, ok := s.beginStream(w, tenant, "", false)
	if !ok {
		return
	}
	defer end()
	ch := make(chan *nats.Msg, 1024) // bounded: a slow reader loses updates (counted), not memory
	sub, err := s.nc.ChanSubscribe(wire.ViewPrefix+"."+tenant+".*", ch)
	if err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	defer func() {
		if n, err := sub.Dropped(); err == nil && n > 0 {
			s.m.TapDropped.Add(float64(n))
		}
		_ = sub.Unsubscribe()
	}()
	if err := s.nc.FlushTimeout(s.hub.cfg.SnapshotTimeout); err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	streamMsgs(s, w, r, ch, false, s.cfg.Verifier.Deadline(c), nil, func(m *nats.Msg, dst []byte) []byte {
		part := m.Header.Get(wire.HeaderPart)
		if part != "" && !strings.HasPrefix(part, "0/") {
			return dst
		}
		thread, err := wire.DecodeThread(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		if err != nil || !allow(thread) {
			return dst
		}
		seq, err := strconv.ParseUint(m.Header.Get(wire.HeaderSeq), 10, 64)
		if err != nil {
			return dst
		}
		status := m.Header.Get(wire.HeaderStatus)
		if status == "" && part == "" {
			var body struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(m.Data, &body)
			status = body.Status
		}
		b, _ := json.Marshal(ThreadInfo{Thread: thread, Seq: seq, Status: status, Updated: time.Now().UTC()})
		return appendData(dst, b)
	})
}

// tap serves GET /v1/tap: the tenant's analytics tap as SSE (default) or
// NDJSON (?format=ndjson or Accept: application/x-ndjson), optionally
// filtered by ?types=T1,T2 (AG-UI type names or RUN_SUMMARY). A token
// limited to some threads sees only those threads' messages. Without
// ?since= (or Last-Event-ID) it is the live tap, from core NATS: what is
// published while the stream is open. With one it reads the tap stream
// (tapReplay, tapreplay.go).
func (s *Server) tap(w http.ResponseWriter, r *http.Request) {
	c, ok := s.authorize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	types, err := parseTapTypes(q.Get("types"))
	if err != nil {
		s.denyDetail(w, http.StatusBadRequest, err.reason, err.detail)
		return
	}
	ndjson := q.Get("format") == "ndjson" || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	if since, ok, serr := parseTapSince(q.Get("since"), r.Header.Get("Last-Event-ID")); serr != nil {
		s.denyDetail(w, http.StatusBadRequest, "bad_since", serr.Error())
		return
	} else if ok {
		s.tapReplay(w, r, c, types, since, ndjson)
		return
	}
	// One subscription per type while they are few; past tapSubsMax the
	// tenant's whole tap through one subscription, filtered here: a
	// reader costs the shared connection a bounded number of
	// subscriptions whatever its list.
	var subjects []string
	var only map[string]bool
	switch {
	case len(types) == 0:
		subjects = []string{wire.TapPrefix + "." + c.Tenant + ".*.*"}
	case len(types) <= tapSubsMax:
		for _, t := range types {
			subjects = append(subjects, wire.TapPrefix+"."+c.Tenant+"."+t+".*")
		}
	default:
		subjects = []string{wire.TapPrefix + "." + c.Tenant + ".*.*"}
		only = make(map[string]bool, len(types))
		for _, t := range types {
			only[t] = true
		}
	}
	end, ok := s.beginStream(w, c.Tenant, "", true)
	if !ok {
		return
	}
	defer end()
	ch := make(chan *nats.Msg, tapPending)
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			if n, err := sub.Dropped(); err == nil && n > 0 {
				s.m.TapDropped.Add(float64(n))
			}
			_ = sub.Unsubscribe()
		}
	}()
	for _, subj := range subjects {
		sub, err := s.nc.ChanSubscribe(subj, ch)
		if err != nil {
			s.deny(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		subs = append(subs, sub)
	}
	// The subscriptions must be registered at the server before the client
	// is told the stream is open.
	if err := s.nc.FlushTimeout(s.hub.cfg.SnapshotTimeout); err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	all := c.AllThreads()
	// Tap messages larger than one NATS message arrive in parts, which
	// other threads' messages may interleave: joined per subject, and one
	// that lost a part is dropped whole. streamMsgs calls enc from this
	// handler's goroutine alone.
	parts := wire.Assembler{Max: s.hub.cfg.MaxMessageBytes}
	// A reader that cannot keep up is cut, alone: its channel (tapPending
	// messages) filled and nats.go dropped what did not fit, so the rest
	// of its stream would have a hole. The shared connection never waits
	// for it.
	slow := func() bool {
		for _, sub := range subs {
			if n, err := sub.Dropped(); err == nil && n > 0 {
				return true
			}
		}
		return false
	}
	streamMsgs(s, w, r, ch, ndjson, s.cfg.Verifier.Deadline(c), slow, func(part *nats.Msg, dst []byte) []byte {
		if only != nil && !only[tapType(part.Subject)] {
			return dst
		}
		m, err := parts.Add(part)
		if err != nil {
			s.m.BadTap.Inc()
		}
		if m == nil {
			return dst
		}
		if !all {
			i := strings.LastIndexByte(m.Subject, '.')
			id, err := wire.DecodeThread(m.Subject[i+1:])
			if err != nil || !c.AllowsThread(id) {
				return dst
			}
		}
		if ndjson {
			dst = append(dst, m.Data...)
			return append(dst, '\n')
		}
		return appendData(dst, m.Data)
	})
}

// Tap limits. The ?types= list names at most maxTapTypeEntries entries
// (there are 32 distinct values: the 31 event types and RUN_SUMMARY);
// duplicates count once. A reader's channel holds tapPending messages.
const (
	maxTapTypeEntries = 64
	tapSubsMax        = 4
	tapPending        = 4096
)

// tapTypeErr is why a ?types= list was refused: a bounded reason (the
// metric label) and a detail for the client.
type tapTypeErr struct{ reason, detail string }

// parseTapTypes validates, deduplicates and bounds a ?types= list ("" means
// every type): each entry must be an AG-UI event type or RUN_SUMMARY.
func parseTapTypes(list string) ([]string, *tapTypeErr) {
	if list == "" {
		return nil, nil
	}
	if n := strings.Count(list, ",") + 1; n > maxTapTypeEntries {
		return nil, &tapTypeErr{"too_many_types", fmt.Sprintf("types lists %d entries; at most %d are allowed", n, maxTapTypeEntries)}
	}
	var out []string
	for t := range strings.SplitSeq(list, ",") {
		if t != wire.RunSummaryType && codec.ParseType(t) == codec.TypeUnknown {
			q := t
			if len(q) > 40 {
				q = q[:40] + "…"
			}
			return nil, &tapTypeErr{"bad_type", fmt.Sprintf("types: %q is not an AG-UI event type or %s", q, wire.RunSummaryType)}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// tapType returns the TYPE token of tap.<tenant>.<TYPE>.<thread>.
func tapType(subj string) string {
	i := strings.LastIndexByte(subj, '.')
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(subj[:i], '.')
	return subj[j+1 : i]
}

// streamMsgs writes the messages from ch (NATS messages, or what a
// handler makes of them) as enc encodes them, batching whatever is
// already queued into one write and flush, with heartbeats, lifetime,
// drain and the token's expiry (at expires, an SSE stream gets ": end
// reason=token_expired") like pump. Once slow (nil: never) reports that
// messages for this reader were dropped, it ends the stream after a last
// "slow reader" comment (SSE), counted as EndSlow.
func streamMsgs[M any](s *Server, w http.ResponseWriter, r *http.Request, ch <-chan M, ndjson bool, expires time.Time, slow func() bool, enc func(M, []byte) []byte) {
	h := w.Header()
	if ndjson {
		h.Set("Content-Type", "application/x-ndjson")
	} else {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	var lifetime <-chan time.Time
	if s.cfg.MaxLifetime > 0 {
		t := time.NewTimer(s.cfg.MaxLifetime)
		defer t.Stop()
		lifetime = t.C
	}
	ex := time.NewTimer(expires.Sub(s.cfg.Now()))
	defer ex.Stop()
	var buf []byte
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		select {
		case m := <-ch:
			buf = enc(m, buf[:0])
		drain:
			for len(buf) < 64<<10 {
				select {
				case m := <-ch:
					buf = enc(m, buf)
				default:
					break drain
				}
			}
			if len(buf) > 0 && !write(buf) {
				return
			}
			if slow != nil && slow() {
				s.m.Ended.WithLabelValues(EndSlow).Inc()
				if !ndjson {
					_ = write(slowComment)
				}
				return
			}
		case <-hb.C:
			if !ndjson && !write(hbComment) {
				return
			}
		case <-lifetime:
			return
		case <-ex.C:
			if !ndjson {
				write([]byte(": end reason=" + EndTokenExpired + "\n\n"))
			}
			return
		case <-s.drainCtx.Done():
			return
		case <-r.Context().Done():
			return
		}
	}
}
