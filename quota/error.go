package quota

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// ErrExceeded is matched (errors.Is) by every *ExceededError.
var ErrExceeded = errors.New("quota: exceeded")

// ExceededError is a refusal: tenant is over the quota Kind.
type ExceededError struct {
	Tenant string
	Kind   Kind
	// Limit is the quota (events or bytes per Window for a rate; the
	// bound of a hold or level, Window 0).
	Limit  float64
	Window time.Duration
	// Remaining is what the tenant could still spend right now (≥ 0).
	Remaining int64
	// RetryAfter is when a retry may succeed: for a rate, when the bucket
	// holds enough again; for a hold or level, a fixed hint.
	RetryAfter time.Duration
}

func (e *ExceededError) Error() string {
	if e.Window > 0 {
		return fmt.Sprintf("quota: tenant over its %s quota (%g per %v)", e.Kind, e.Limit, e.Window)
	}
	return fmt.Sprintf("quota: tenant over its %s quota (%g)", e.Kind, e.Limit)
}

// Is reports ErrExceeded.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// holdRetry is the Retry-After of a refused hold or level: nothing says when
// another request will give its hold back.
const holdRetry = 5 * time.Second

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1.
func (e *ExceededError) RetryAfterSeconds() int64 {
	return max(1, int64(math.Ceil(e.RetryAfter.Seconds())))
}

// SetHeaders writes the refusal as HTTP fields: Retry-After, and the
// RateLimit-Policy and RateLimit fields of draft-ietf-httpapi-ratelimit-headers
// (structured-field lists of a quoted policy name with parameters):
//
//	RateLimit-Policy: "events_per_sec";q=100;w=1
//	RateLimit: "events_per_sec";r=0;t=3
//
// q is the quota, w its window in seconds (absent for a hold or level; a
// rate under one per second is one per as many seconds as hold one), qu
// the unit where the draft's registry has one ("content-bytes" for bytes,
// "concurrency" for holds; events have none registered and leave it out), r
// what remains and t the seconds until a retry may succeed.
func (e *ExceededError) SetHeaders(h http.Header) {
	name := strconv.Quote(e.Kind.String())
	q, w := int64(math.Ceil(e.Limit)), max(1, int64(e.Window/time.Second))
	if e.Window > 0 && e.Limit > 0 && e.Limit < 1 { // q is an integer: one per the window that holds one
		q, w = 1, int64(math.Round(float64(w)/e.Limit))
	}
	policy := name + ";q=" + strconv.FormatInt(q, 10)
	if e.Window > 0 {
		policy += ";w=" + strconv.FormatInt(w, 10)
	}
	switch e.Kind {
	case KindBytes, KindBody:
		policy += `;qu="content-bytes"`
	case KindStreams, KindThreads, KindTaps:
		policy += `;qu="concurrency"`
	}
	t := e.RetryAfterSeconds()
	h.Set("RateLimit-Policy", policy)
	h.Set("RateLimit", name+";r="+strconv.FormatInt(max(0, e.Remaining), 10)+";t="+strconv.FormatInt(t, 10))
	h.Set("Retry-After", strconv.FormatInt(t, 10))
}

// Refusal is the JSON a door answers a refusal with (in its own body type,
// as member "quota"): which quota, its limit and window, and the retry.
type Refusal struct {
	Quota             string  `json:"quota"`
	Limit             float64 `json:"limit"`
	WindowSeconds     int64   `json:"windowSeconds,omitempty"`
	RetryAfterSeconds int64   `json:"retryAfterSeconds"`
}

// Refusal returns e as its JSON body member.
func (e *ExceededError) Refusal() *Refusal {
	return &Refusal{Quota: e.Kind.String(), Limit: e.Limit, WindowSeconds: int64(e.Window / time.Second),
		RetryAfterSeconds: e.RetryAfterSeconds()}
}
