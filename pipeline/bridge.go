package pipeline

// NOTE: the HTTP bridge. It lets an agent that only speaks AG-UI over HTTP
// put a thread's events into the event log: POST them (JSONL, a JSON array,
// or SSE — for example the agent's own SSE response, relayed as it streams)
// and they are validated and published through the publisher SDK (agent/),
// with its batching, de-duplication and per-event results. The bridge reads
// the body incrementally: events reach JetStream while the body is still
// arriving, and the response is written once the body has ended and every
// accepted event is acked.

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
)

// BridgePattern is the route the bridge serves, in net/http.ServeMux syntax.
// {thread...} is the rest of the path, percent-decoded: a thread id holding
// '/' may be sent raw or as %2F; any other byte is sent percent-encoded.
// Mount the bridge with mux.Handle("/v1/ingest/", bridge).
const BridgePattern = "POST /v1/ingest/{tenant}/{thread...}"

// ErrForbidden may be returned (wrapped) by a BridgeConfig.Verify function to
// answer 403 instead of 401: the credentials are valid but do not cover the
// tenant.
var ErrForbidden = errors.New("pipeline: forbidden")

// BridgeConfig configures a Bridge.
type BridgeConfig struct {
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
}

// Bridge is the ingest HTTP bridge, an http.Handler for BridgePattern.
//
// Answers (always a JSON BridgeResponse, except for 404/405 from routing):
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
//   - 503: the events could not be stored (every accepted event failed, the
//     publisher is closed or full).
//
// A Bridge is safe for concurrent use; it starts no goroutines.
type Bridge struct {
	cfg BridgeConfig
	mux *http.ServeMux
	ctr bridgeCounters
}

// BridgeResponse is the JSON body of every bridge answer.
type BridgeResponse struct {
	Accepted      int              `json:"accepted"`
	Events        int              `json:"events"`
	Format        string           `json:"format,omitempty"`
	Rejected      []BridgeEventErr `json:"rejected,omitempty"`
	RejectedCount int              `json:"rejectedCount,omitempty"`
	Failed        []BridgeEventErr `json:"failed,omitempty"`
	FailedCount   int              `json:"failedCount,omitempty"`
	Error         string           `json:"error,omitempty"`
}

// BridgeEventErr is one event of the body that is not in the log.
type BridgeEventErr struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// BridgeStats are the bridge's counters (totals since NewBridge).
type BridgeStats struct {
	Requests       uint64 // requests routed to the bridge
	AuthFailures   uint64 // 401 and 403
	BadRequests    uint64 // 400, 415 and 422
	TooLarge       uint64 // 413
	Unavailable    uint64 // 503
	EventsAccepted uint64 // events stored
	EventsRejected uint64 // events refused as invalid
	EventsFailed   uint64 // valid events not stored
}

type bridgeCounters struct {
	requests, authFailures, badRequests, tooLarge, unavailable atomic.Uint64
	accepted, rejected, failed                                 atomic.Uint64
}

// NewBridge returns a Bridge. It fails without a Publisher or a Verify.
func NewBridge(cfg BridgeConfig) (*Bridge, error) {
	if cfg.Publisher == nil || cfg.Verify == nil {
		return nil, fmt.Errorf("%w: the bridge needs a Publisher and a Verify function", ErrConfig)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxMsgSize - EventHeaderRoom
	}
	if cfg.MaxErrors <= 0 {
		cfg.MaxErrors = 100
	}
	b := &Bridge{cfg: cfg, mux: http.NewServeMux()}
	b.mux.HandleFunc(BridgePattern, b.ingest)
	return b, nil
}

// ServeHTTP routes BridgePattern to the bridge; anything else is 404 or 405.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.mux.ServeHTTP(w, r) }

// Stats returns the counters. Safe for concurrent use.
func (b *Bridge) Stats() BridgeStats {
	return BridgeStats{
		Requests:       b.ctr.requests.Load(),
		AuthFailures:   b.ctr.authFailures.Load(),
		BadRequests:    b.ctr.badRequests.Load(),
		TooLarge:       b.ctr.tooLarge.Load(),
		Unavailable:    b.ctr.unavailable.Load(),
		EventsAccepted: b.ctr.accepted.Load(),
		EventsRejected: b.ctr.rejected.Load(),
		EventsFailed:   b.ctr.failed.Load(),
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
		c("requests_total", "Ingest requests received.", &b.ctr.requests),
		c("auth_failures_total", "Requests refused by the verifier (401/403).", &b.ctr.authFailures),
		c("bad_requests_total", "Requests answered 400, 415 or 422.", &b.ctr.badRequests),
		c("too_large_total", "Requests over the body size limit (413).", &b.ctr.tooLarge),
		c("unavailable_total", "Requests whose events could not be stored (503).", &b.ctr.unavailable),
		c("events_accepted_total", "Events stored.", &b.ctr.accepted),
		c("events_rejected_total", "Events refused as invalid.", &b.ctr.rejected),
		c("events_failed_total", "Valid events that could not be stored.", &b.ctr.failed),
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
	if err := ValidTenant(tenant); err != nil {
		b.fail(w, http.StatusBadRequest, err)
		return
	}
	if thread == "" {
		b.fail(w, http.StatusBadRequest, errors.New("pipeline: missing thread id in the path"))
		return
	}
	if len(thread) > MaxThreadIDLen {
		b.fail(w, http.StatusBadRequest, fmt.Errorf("%w: %d bytes (max %d)", ErrThreadLen, len(thread), MaxThreadIDLen))
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
		writeJSON(w, status, BridgeResponse{Error: err.Error()})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !acceptedTypes[mt] {
			b.fail(w, http.StatusUnsupportedMediaType, fmt.Errorf("pipeline: unsupported Content-Type %q", truncate(ct)))
			return
		}
	}
	if r.ContentLength > b.cfg.MaxBodyBytes {
		b.ctr.tooLarge.Add(1)
		writeJSON(w, http.StatusRequestEntityTooLarge, BridgeResponse{
			Error: fmt.Sprintf("pipeline: body of %d bytes over the limit of %d", r.ContentLength, b.cfg.MaxBodyBytes)})
		return
	}
	body := http.MaxBytesReader(w, r.Body, b.cfg.MaxBodyBytes)
	res, err := agent.PublishStream(r.Context(), b.cfg.Publisher, tenant, thread, body,
		agent.StreamOptions{MaxEventBytes: b.cfg.MaxEventBytes, MaxErrors: b.cfg.MaxErrors})

	resp := b.response(res)
	status := b.status(res, err)
	var cerr *codec.Error
	switch {
	case errors.As(err, &cerr) && cerr.Kind == codec.KindTooLarge:
		resp.Error = fmt.Sprintf("pipeline: the event at index %d is larger than the largest event accepted, %d bytes (--max-msg-size): %v",
			res.Events, b.cfg.MaxEventBytes, err)
	case err != nil:
		resp.Error = err.Error()
	case status == http.StatusBadRequest:
		resp.Error = "pipeline: the body holds no event"
	}
	b.count(status)
	writeJSON(w, status, resp)
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

func (b *Bridge) response(res agent.StreamResult) BridgeResponse {
	b.ctr.accepted.Add(uint64(res.Accepted))
	b.ctr.rejected.Add(uint64(res.RejectedCount))
	b.ctr.failed.Add(uint64(res.FailedCount))
	resp := BridgeResponse{
		Accepted: res.Accepted, Events: res.Events, Format: res.Format,
		RejectedCount: res.RejectedCount, FailedCount: res.FailedCount,
	}
	for _, e := range res.Rejected {
		resp.Rejected = append(resp.Rejected, BridgeEventErr{Index: e.Index, Reason: e.Err.Error()})
	}
	for _, e := range res.Failed {
		resp.Failed = append(resp.Failed, BridgeEventErr{Index: e.Index, Reason: e.Err.Error()})
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
	writeJSON(w, status, BridgeResponse{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v BridgeResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}

// VerifyAll is a BridgeConfig.Verify that accepts every request: for tests
// and for a laptop deployment that binds the bridge to loopback only.
func VerifyAll(*http.Request, string) error { return nil }

var _ http.Handler = (*Bridge)(nil)
