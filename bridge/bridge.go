package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// Pattern is the route the bridge serves, in net/http.ServeMux syntax.
// {thread...} is the rest of the path, percent-decoded: a thread id holding
// '/' may be sent raw or as %2F; any other byte is sent percent-encoded.
// Mount the bridge with mux.Handle("/v1/ingest/", bridge).
const Pattern = "POST /v1/ingest/{tenant}/{thread...}"

// ErrForbidden may be returned (wrapped) by a Config.Verify function to
// answer 403 instead of 401: the credentials are valid but do not cover the
// tenant.
var ErrForbidden = errors.New("bridge: forbidden")

// Config configures a Bridge.
type Config struct {
	// Publisher publishes the events; the caller owns it (and closes it
	// after the HTTP server has stopped).
	Publisher *agent.Publisher
	// Verify authenticates a request for tenant before its body is read,
	// typically by checking its bearer token. A non-nil error answers 401
	// (403 when it wraps ErrForbidden). Required: use a function returning
	// nil to accept every request, deliberately. It is called concurrently.
	Verify func(r *http.Request, tenant string) error
	// MaxBodyBytes bounds a request body; beyond it the answer is 413 (see
	// Bridge). Zero: 64 MiB.
	MaxBodyBytes int64
	// MaxEventBytes bounds one event of the body: the largest event the
	// pipeline accepts (Config.MaxMsgSize, less room for headers); beyond
	// it the answer is 413. Zero: DefaultMaxMsgSize - EventHeaderRoom.
	MaxEventBytes int
	// MaxErrors bounds the rejected and failed events listed in a response
	// (their counts stay exact). Zero: 100.
	MaxErrors int
	// Quota, when set, holds each tenant to its quotas (see Bridge): body
	// bytes in flight at the request's entry, events/s and bytes/s per
	// event read. nil: no quotas.
	Quota *quota.Limiter
	// Retained, when set, is asked at each request's entry whether the
	// tenant's retained events are over its quota (RetainedCounter.Check);
	// a non-nil *quota.ExceededError is answered 429 before the body is
	// read.
	Retained func(tenant string) error
	// QuotaLabels bounds the tenant label of the refusals metric (nil: the
	// first quota.DefaultTenantLabels tenants, the rest as "_other").
	QuotaLabels *quota.TenantLabels
	// Idempotency, when set, is the bucket of first answers
	// (EnsureIdempotencyBucket) and makes the bridge honour the
	// Idempotency-Key request header (see Bridge). nil: a request with
	// the header is refused with 400, since it could not be honoured.
	Idempotency jetstream.KeyValue
	// IdempotencySecret keys the Nats-Msg-Ids of keyed requests' events
	// (IdempotencySecret returns the deployment's); required, of at least
	// MinIdempotencySecret bytes, with Idempotency.
	IdempotencySecret []byte
	// IdempotencyWindow is how long a key is remembered: the stream's
	// Duplicates window, which the bucket's TTL equals
	// (IdempotencyKVConfig). It is quoted in answers; zero: 2 minutes.
	IdempotencyWindow time.Duration
	// Storage, when set, is asked at each request's entry whether the
	// event storage can take writes; while it cannot, the answer is 507
	// with Retry-After and the reason, before the body is read. A request
	// in progress stops waiting for its acks when storage becomes full,
	// and JetStream's storage refusals of its events are reported to it.
	Storage *pipeline.StorageWatch
	// Window bounds the bytes of one request's events published and not
	// yet acked (agent.StreamOptions.Window). Zero:
	// agent.DefaultStreamWindow (1 MiB).
	Window int
}

// Bridge is the ingest HTTP bridge, an http.Handler for Pattern.
//
// Answers (always a JSON Response, except for 404/405 from routing):
//   - 200: the body was read to its end and at least one event was stored,
//     or it held none that could be; rejected and failed events are listed
//     with their 0-based index in the body and the reason.
//   - 400: bad tenant or thread, bad framing (events before the bad spot
//     were published and are counted), or a body without any event.
//   - 401/403: Verify refused the request; the body is not read.
//   - 413: the body exceeded MaxBodyBytes — declared by Content-Length, it
//     is refused before reading; a chunked body is cut at the limit, and
//     the events before the cut are published and counted — or an event
//     exceeded MaxEventBytes (the events before it were published and are
//     counted; the error names the limit).
//   - 415: a Content-Type that is none of the accepted ones.
//   - 422: every event of the body was invalid.
//   - 429: the tenant is over a quota (Config.Quota), with
//     Retry-After, RateLimit-Policy and RateLimit fields and the quota named
//     in the body's "quota" member. Over events retained, or when the
//     Content-Length alone would take its body bytes in flight over the
//     quota, the body is not read. Otherwise the refusal comes at the event
//     over events/s or bytes/s, or at the read of a body of unknown length
//     that takes it over its bytes in flight: the events before it were
//     published and are counted in "accepted", the rest of the body is not
//     read.
//   - 503: the events could not be stored (every accepted event failed, the
//     publisher is closed or full).
//   - 507: the event storage is full (Config.Storage, or JetStream
//     refused an event for want of room), with Retry-After and the reason
//     in "error"; "accepted" counts the events stored before.
//
// Idempotency-Key (Config.Idempotency; the semantics of
// draft-ietf-httpapi-idempotency-key-header). The key is an sf-string of 1
// to MaxIdempotencyKeyLen printable ASCII bytes, scoped to the request's
// tenant and thread. Each event of a keyed request is published alone,
// under a message id derived from the key and its index in the body, so a
// retry of a request that was cut (the connection, or the process, died)
// stores only what the first attempt did not: "accepted" counts every
// event of the body now in the log, "duplicates" those of them an earlier
// attempt had stored. A request whose body was read to its end and whose
// events were all stored or refused for good is remembered with its
// answer for IdempotencyWindow: a retry with the same body gets the same
// status and body (with Threadcast-Idempotent-Replay: true) and publishes
// nothing; the key with another body is 422; a second request with a key
// that is in flight on this bridge is 409 (Retry-After: 1). Answers 429
// and 503, and requests cut short, are not remembered: their retry runs
// again, storing what is missing. Past the window a key is forgotten.
//
// Memory. A request holds its read buffer (at most MaxEventBytes + 4 KiB;
// an SSE body also assembles its event in up to two buffers of the
// largest event's size), a copy of the event being published, and up to
// Window bytes of published, unacked events: about 2-4 × MaxEventBytes +
// Window per request whatever the body's length (3-5 MiB at the
// defaults), plus the response's error lists (MaxErrors entries).
//
// A Bridge is safe for concurrent use; it starts no goroutines.
type Bridge struct {
	cfg     Config
	mux     *http.ServeMux
	ctr     bridgeCounters
	refused *prometheus.CounterVec // quota refusals by tenant (bounded) and quota

	idemMu   sync.Mutex // a leaf: guards idemBusy
	idemBusy map[string]struct{}
}

// Response is the JSON body of every bridge answer.
type Response struct {
	// Accepted counts the events of the body that are in the log.
	Accepted int `json:"accepted"`
	// Duplicates counts those of them an earlier request with the same
	// Idempotency-Key had stored.
	Duplicates    int        `json:"duplicates,omitempty"`
	Events        int        `json:"events"`
	Format        string     `json:"format,omitempty"`
	Rejected      []EventErr `json:"rejected,omitempty"`
	RejectedCount int        `json:"rejectedCount,omitempty"`
	Failed        []EventErr `json:"failed,omitempty"`
	FailedCount   int        `json:"failedCount,omitempty"`
	Error         string     `json:"error,omitempty"`
	// Quota names the quota a 429 is about.
	Quota *quota.Refusal `json:"quota,omitempty"`
}

// EventErr is one event of the body that is not in the log.
type EventErr struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// Stats are the bridge's counters (totals since New).
type Stats struct {
	Requests       uint64 // requests routed to the bridge
	AuthFailures   uint64 // 401 and 403
	BadRequests    uint64 // 400, 415 and 422
	TooLarge       uint64 // 413
	Unavailable    uint64 // 503
	StorageFull    uint64 // 507
	OverQuota      uint64 // 429
	EventsAccepted uint64 // events stored
	EventsRejected uint64 // events refused as invalid
	EventsFailed   uint64 // valid events not stored
	Replays        uint64 // answers replayed for a retried Idempotency-Key
	KeyMismatches  uint64 // 422: an Idempotency-Key reused with another body
	KeyConflicts   uint64 // 409: an Idempotency-Key already in flight
	EventsDeduped  uint64 // events of keyed requests already stored before
}

type bridgeCounters struct {
	requests, authFailures, badRequests, tooLarge, unavailable, overQuota atomic.Uint64
	storageFull                                                           atomic.Uint64
	accepted, rejected, failed                                            atomic.Uint64
	idemReplays, idemMismatch, idemConflicts, deduped                     atomic.Uint64
}

// New returns a Bridge. It fails without a Publisher or a Verify.
func New(cfg Config) (*Bridge, error) {
	if cfg.Publisher == nil || cfg.Verify == nil {
		return nil, fmt.Errorf("%w: the bridge needs a Publisher and a Verify function", pipeline.ErrConfig)
	}
	if cfg.Idempotency != nil && len(cfg.IdempotencySecret) < MinIdempotencySecret {
		return nil, fmt.Errorf("%w: an idempotency bucket needs a secret of at least %d bytes (IdempotencySecret)", pipeline.ErrConfig, MinIdempotencySecret)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = pipeline.DefaultMaxMsgSize - pipeline.EventHeaderRoom
	}
	if cfg.MaxErrors <= 0 {
		cfg.MaxErrors = 100
	}
	if cfg.QuotaLabels == nil {
		cfg.QuotaLabels = quota.NewTenantLabels(quota.DefaultTenantLabels)
	}
	if cfg.IdempotencyWindow <= 0 {
		cfg.IdempotencyWindow = 2 * time.Minute
	}
	if cfg.Window == 0 {
		cfg.Window = agent.DefaultStreamWindow
	}
	b := &Bridge{cfg: cfg, mux: http.NewServeMux(), idemBusy: map[string]struct{}{}, refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "threadcast_bridge", Name: "quota_refused_total",
		Help: "Requests refused or cut short over a tenant quota (429), by tenant (bounded: the rest as _other) and quota."},
		[]string{"tenant", "quota"})}
	b.mux.HandleFunc(Pattern, b.ingest)
	return b, nil
}

// ServeHTTP routes Pattern to the bridge; anything else is 404 or 405.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.mux.ServeHTTP(w, r) }

// Stats returns the counters. Safe for concurrent use.
func (b *Bridge) Stats() Stats {
	return Stats{
		Requests:       b.ctr.requests.Load(),
		AuthFailures:   b.ctr.authFailures.Load(),
		BadRequests:    b.ctr.badRequests.Load(),
		TooLarge:       b.ctr.tooLarge.Load(),
		Unavailable:    b.ctr.unavailable.Load(),
		StorageFull:    b.ctr.storageFull.Load(),
		OverQuota:      b.ctr.overQuota.Load(),
		EventsAccepted: b.ctr.accepted.Load(),
		EventsRejected: b.ctr.rejected.Load(),
		EventsFailed:   b.ctr.failed.Load(),
		Replays:        b.ctr.idemReplays.Load(),
		KeyMismatches:  b.ctr.idemMismatch.Load(),
		KeyConflicts:   b.ctr.idemConflicts.Load(),
		EventsDeduped:  b.ctr.deduped.Load(),
	}
}

// Collectors returns Prometheus counters reading the bridge's Stats, for
// cmd/* to register (namespace threadcast_bridge).
func (b *Bridge) Collectors() []prometheus.Collector {
	c := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "threadcast_bridge", Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		c("requests_total", "pipeline.Ingest requests received.", &b.ctr.requests),
		c("auth_failures_total", "Requests refused by the verifier (401/403).", &b.ctr.authFailures),
		c("bad_requests_total", "Requests answered 400, 415 or 422.", &b.ctr.badRequests),
		c("too_large_total", "Requests over the body size limit (413).", &b.ctr.tooLarge),
		c("unavailable_total", "Requests whose events could not be stored (503).", &b.ctr.unavailable),
		c("storage_full_total", "Requests refused or cut short because the event storage is full (507).", &b.ctr.storageFull),
		c("over_quota_total", "Requests refused or cut short over a tenant quota (429).", &b.ctr.overQuota),
		b.refused,
		c("events_accepted_total", "Events stored.", &b.ctr.accepted),
		c("events_rejected_total", "Events refused as invalid.", &b.ctr.rejected),
		c("events_failed_total", "Valid events that could not be stored.", &b.ctr.failed),
		c("idempotent_replays_total", "Answers replayed for a retried Idempotency-Key.", &b.ctr.idemReplays),
		c("idempotency_mismatches_total", "Idempotency-Keys reused with another body (422).", &b.ctr.idemMismatch),
		c("idempotency_conflicts_total", "Idempotency-Keys already in flight (409).", &b.ctr.idemConflicts),
		c("events_deduplicated_total", "Events of keyed requests an earlier attempt had stored.", &b.ctr.deduped),
	}
}

// acceptedTypes are the Content-Types the bridge reads (the framing itself
// is detected from the body). An absent Content-Type is accepted too.
var acceptedTypes = map[string]bool{
	"text/event-stream":    true,
	"application/x-ndjson": true,
	"application/jsonl":    true,
	"application/x-jsonl":  true,
	"application/json":     true,
	"text/plain":           true,
}

func (b *Bridge) ingest(w http.ResponseWriter, r *http.Request) {
	b.ctr.requests.Add(1)
	tenant, thread := r.PathValue("tenant"), r.PathValue("thread")
	if err := wire.ValidTenant(tenant); err != nil {
		b.fail(w, http.StatusBadRequest, err)
		return
	}
	if thread == "" {
		b.fail(w, http.StatusBadRequest, errors.New("bridge: missing thread id in the path"))
		return
	}
	if err := wire.ValidThread(thread); err != nil {
		b.fail(w, http.StatusBadRequest, err)
		return
	}
	if err := b.cfg.Verify(r, tenant); err != nil {
		b.ctr.authFailures.Add(1)
		status := http.StatusUnauthorized
		if errors.Is(err, ErrForbidden) {
			status = http.StatusForbidden
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="threadcast"`)
		}
		writeJSON(w, status, Response{Error: err.Error()})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !acceptedTypes[mt] {
			b.fail(w, http.StatusUnsupportedMediaType, fmt.Errorf("bridge: unsupported Content-Type %q", truncate(ct)))
			return
		}
	}
	if r.ContentLength > b.cfg.MaxBodyBytes {
		b.ctr.tooLarge.Add(1)
		writeJSON(w, http.StatusRequestEntityTooLarge, Response{
			Error: fmt.Sprintf("bridge: body of %d bytes over the limit of %d", r.ContentLength, b.cfg.MaxBodyBytes)})
		return
	}
	key, keyed, err := parseIdempotencyKey(r.Header.Get(HeaderIdempotencyKey))
	if err == nil && keyed && b.cfg.Idempotency == nil {
		err = fmt.Errorf("%w: this bridge keeps no idempotency records", ErrIdempotencyKey)
	}
	if err != nil {
		b.fail(w, http.StatusBadRequest, err)
		return
	}
	opts := agent.StreamOptions{MaxEventBytes: b.cfg.MaxEventBytes, MaxErrors: b.cfg.MaxErrors, Window: b.cfg.Window}
	if b.cfg.Retained != nil {
		if err := b.cfg.Retained(tenant); errors.Is(err, quota.ErrExceeded) {
			b.overQuota(w, Response{}, err)
			return
		}
	}
	if st := b.cfg.Storage; st != nil {
		if err := st.Check(); err != nil {
			b.storageFull(w, Response{}, err)
			return
		}
	}
	var in io.Reader = r.Body
	if q := b.cfg.Quota; q != nil {
		qr, err := b.admit(tenant, r.ContentLength)
		if err != nil {
			b.overQuota(w, Response{}, err)
			return
		}
		defer qr.release()
		qr.body = r.Body
		in = qr
		opts.Admit = func(ev []byte) error { return q.Take(tenant, 1, int64(len(ev))) }
	}
	var kr *keyedRequest
	if keyed {
		var done bool
		if kr, in, done = b.beginKeyed(w, r, idemID(b.cfg.IdempotencySecret, tenant, thread, key), in, &opts); done {
			return
		}
		defer b.unclaim(kr.id)
	}
	body := &headReader{r: http.MaxBytesReader(w, io.NopCloser(in), b.cfg.MaxBodyBytes)}
	ctx, stopWatch := b.watchStorage(r.Context())
	res, err := agent.PublishStream(ctx, b.cfg.Publisher, tenant, thread, body, opts)
	stopWatch()

	resp := b.response(res)
	if errors.Is(err, quota.ErrExceeded) {
		b.overQuota(w, resp, err)
		return
	}
	if serr := b.storageRefusal(res); serr != nil {
		resp.Error = serr.Error()
		b.storageFull(w, resp, serr)
		return
	}
	status := b.status(res, err)
	var cerr *codec.Error
	switch {
	case errors.As(err, &cerr) && cerr.Kind == codec.KindTooLarge:
		resp.Error = fmt.Sprintf("bridge: the event at index %d is larger than the largest event accepted, %d bytes (--max-msg-size): %v",
			res.Events, b.cfg.MaxEventBytes, err)
	case errors.As(err, &cerr):
		resp.Error = "bridge: body read as " + formatName(res.Format) + ": " + err.Error() + "; " + body.starts()
	case err != nil:
		resp.Error = err.Error()
	case status == http.StatusBadRequest:
		resp.Error = noEventReason(res.Format, body)
	}
	b.count(status)
	if kr != nil && final(status, res, err) {
		b.finishKeyed(r.Context(), kr, body, status, &resp)
	}
	writeJSON(w, status, resp)
}

// final reports whether a keyed request's answer is the one its retries
// get: the body was read to its end (or to a framing error or size limit,
// which the same body meets again) and no event failed for a reason that a
// retry could overcome.
func final(status int, res agent.StreamResult, err error) bool {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || res.FailedCount > 0 {
		return false
	}
	var maxErr *http.MaxBytesError
	var cerr *codec.Error
	return err == nil || errors.As(err, &maxErr) || (errors.As(err, &cerr) && cerr.Kind != codec.KindTruncated)
}

// watchStorage returns ctx, cancelled as well when storage becomes full
// (a full disk leaves publishes unanswered), and the function that stops
// watching; it waits for the watching goroutine.
func (b *Bridge) watchStorage(ctx context.Context) (context.Context, func()) {
	if b.cfg.Storage == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	full := b.cfg.Storage.Full()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-full:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); <-done }
}

// storageRefusal reports, as a *StorageError, that events of res were not
// stored for want of room: JetStream refused one (reported to the watch),
// or the watch found storage full while the request waited.
func (b *Bridge) storageRefusal(res agent.StreamResult) error {
	st := b.cfg.Storage
	for _, f := range res.Failed {
		if pipeline.IsStorageError(f.Err) {
			if st != nil {
				st.Report(f.Err)
				if err := st.Check(); err != nil {
					return err
				}
			}
			return &pipeline.StorageError{Reason: "JetStream refused a write: " + f.Err.Error(), RetryAfter: 5 * time.Second}
		}
	}
	if st != nil && res.Accepted < res.Events-res.RejectedCount {
		return st.Check()
	}
	return nil
}

// storageFull answers 507 for err (a *StorageError).
func (b *Bridge) storageFull(w http.ResponseWriter, resp Response, err error) {
	var se *pipeline.StorageError
	if errors.As(err, &se) {
		w.Header().Set("Retry-After", se.RetryAfterSeconds())
	}
	b.ctr.storageFull.Add(1)
	resp.Error = err.Error()
	writeJSON(w, http.StatusInsufficientStorage, resp)
}

// admit takes the body bytes in flight a request's Content-Length declares
// (until release).
func (b *Bridge) admit(tenant string, contentLength int64) (*quotaReader, error) {
	q := b.cfg.Quota
	qr := &quotaReader{q: q, tenant: tenant, declared: contentLength >= 0}
	if contentLength > 0 {
		if err := q.AcquireBody(tenant, contentLength); err != nil {
			return nil, err
		}
		qr.held = contentLength
	}
	return qr, nil
}

// quotaReader reads a request body of unknown length within the tenant's
// body-in-flight quota: each read first takes the bytes it may fill (all of
// its buffer, or what the quota has left), and gives back what it did not
// fill. A read when the quota has nothing left fails with the quota's
// error. A body of declared length took its bytes at entry and reads
// through.
type quotaReader struct {
	q        *quota.Limiter
	tenant   string
	body     io.Reader
	declared bool
	held     int64
}

func (r *quotaReader) Read(p []byte) (int, error) {
	if r.declared {
		return r.body.Read(p)
	}
	want := int64(len(p))
	if err := r.q.AcquireBody(r.tenant, want); err != nil {
		var qe *quota.ExceededError
		if !errors.As(err, &qe) || qe.Remaining <= 0 {
			return 0, err
		}
		if want = min(want, qe.Remaining); r.q.AcquireBody(r.tenant, want) != nil {
			return 0, err
		}
		p = p[:want]
	}
	n, err := r.body.Read(p)
	if unused := want - int64(n); unused > 0 {
		r.q.ReleaseBody(r.tenant, unused)
	}
	r.held += int64(n)
	return n, err
}

func (r *quotaReader) release() {
	if r.held > 0 {
		r.q.ReleaseBody(r.tenant, r.held)
	}
}

// overQuota answers 429 for err (an *quota.ExceededError) with resp's
// counts of what was stored before it.
func (b *Bridge) overQuota(w http.ResponseWriter, resp Response, err error) {
	var qe *quota.ExceededError
	errors.As(err, &qe)
	b.ctr.overQuota.Add(1)
	b.refused.WithLabelValues(b.cfg.QuotaLabels.Label(qe.Tenant), qe.Kind.String()).Inc()
	qe.SetHeaders(w.Header())
	resp.Error = err.Error()
	resp.Quota = qe.Refusal()
	writeJSON(w, http.StatusTooManyRequests, resp)
}

// status maps PublishStream's outcome onto the answer's status code.
func (b *Bridge) status(res agent.StreamResult, err error) int {
	var maxErr *http.MaxBytesError
	var cerr *codec.Error
	switch {
	case errors.As(err, &maxErr), errors.As(err, &cerr) && cerr.Kind == codec.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, agent.ErrClosed) || errors.Is(err, agent.ErrOverflow):
		return http.StatusServiceUnavailable
	case errors.As(err, &cerr), errors.Is(err, agent.ErrBadThread), errors.Is(err, agent.ErrBadTenant):
		return http.StatusBadRequest
	case err != nil:
		// A read error of the body (the client went away) or the request's
		// ctx ending: nobody may be listening, but say what happened.
		return http.StatusBadRequest
	case res.Events == 0:
		return http.StatusBadRequest
	case res.Accepted == 0 && res.FailedCount > 0:
		return http.StatusServiceUnavailable
	case res.Accepted == 0 && res.RejectedCount > 0:
		return http.StatusUnprocessableEntity
	}
	return http.StatusOK
}

func (b *Bridge) response(res agent.StreamResult) Response {
	b.ctr.accepted.Add(uint64(res.Accepted))
	b.ctr.rejected.Add(uint64(res.RejectedCount))
	b.ctr.failed.Add(uint64(res.FailedCount))
	b.ctr.deduped.Add(uint64(res.Duplicates))
	resp := Response{
		Accepted: res.Accepted, Duplicates: res.Duplicates, Events: res.Events, Format: res.Format,
		RejectedCount: res.RejectedCount, FailedCount: res.FailedCount,
	}
	for _, e := range res.Rejected {
		resp.Rejected = append(resp.Rejected, EventErr{Index: e.Index, Reason: e.Err.Error()})
	}
	for _, e := range res.Failed {
		resp.Failed = append(resp.Failed, EventErr{Index: e.Index, Reason: e.Err.Error()})
	}
	return resp
}

func (b *Bridge) count(status int) {
	switch status {
	case http.StatusRequestEntityTooLarge:
		b.ctr.tooLarge.Add(1)
	case http.StatusServiceUnavailable:
		b.ctr.unavailable.Add(1)
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		b.ctr.badRequests.Add(1)
	}
}

func (b *Bridge) fail(w http.ResponseWriter, status int, err error) {
	b.count(status)
	writeJSON(w, status, Response{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v Response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}

// headReader keeps the first bytes it reads, for error messages.
type headReader struct {
	r    io.Reader
	head [48]byte
	n    int
	any  bool // a byte that is not whitespace was read
}

func (h *headReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += copy(h.head[min(h.n, len(h.head)):], p[:n])
	if !h.any && len(bytes.TrimSpace(p[:n])) > 0 {
		h.any = true
	}
	return n, err
}

// starts describes the body's first bytes.
func (h *headReader) starts() string {
	if h.n == 0 {
		return "the body is empty"
	}
	k := min(h.n, len(h.head))
	q := strconv.Quote(string(h.head[:k]))
	if h.n > k {
		q += "…"
	}
	return "the body starts with " + q
}

// formatName names a StreamReader format for people.
func formatName(f string) string {
	switch f {
	case "jsonl":
		return "JSONL (it starts with '{')"
	case "array":
		return "a JSON array (it starts with '[')"
	case "sse":
		return "SSE (it starts with neither '{' nor '[')"
	}
	return "nothing (no byte)"
}

// noEventReason says why a body that framed cleanly held no event.
func noEventReason(format string, h *headReader) string {
	switch {
	case !h.any:
		return "bridge: the body holds no event: " + h.starts() + " or only whitespace"
	case format == "sse":
		return "bridge: the body holds no event: read as " + formatName(format) +
			`, no line is an SSE "data:" field; ` + h.starts()
	}
	return "bridge: the body holds no event: read as " + formatName(format) + ", which is empty; " + h.starts()
}

// VerifyAll is a Config.Verify that accepts every request: for tests
// and for a laptop deployment that binds the bridge to loopback only.
func VerifyAll(*http.Request, string) error { return nil }

var _ http.Handler = (*Bridge)(nil)

// truncate shortens a hostile input quoted in an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
