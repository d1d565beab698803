package quota

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits are one tenant's quotas. Zero means unlimited, for every field.
type Limits struct {
	// EventsPerSec and EventsBurst are the ingest event rate's token
	// bucket: EventsBurst events may arrive at once, refilled at
	// EventsPerSec. A zero burst is one second's worth.
	EventsPerSec float64 `json:"eventsPerSec"`
	EventsBurst  int64   `json:"eventsBurst"`
	// BytesPerSec and BytesBurst are the same for event bytes. One event
	// larger than the burst still passes when the bucket is full (it then
	// owes the difference), so no event is refused forever.
	BytesPerSec float64 `json:"bytesPerSec"`
	BytesBurst  int64   `json:"bytesBurst"`
	// BodyBytesInFlight bounds the bytes of HTTP request bodies a tenant
	// has in flight at the ingest bridge (declared by Content-Length, or
	// read so far).
	BodyBytesInFlight int64 `json:"bodyBytesInFlight"`
	// EventsRetained bounds the tenant's messages kept in the event log
	// (each one event or one batch; see the pipeline's retained count).
	EventsRetained int64 `json:"eventsRetained"`
	// Streams bounds the tenant's open SSE, WebSocket, live-list and tap
	// streams; Threads the distinct threads they are subscribed to; Taps
	// the tap streams among them.
	Streams int64 `json:"streams"`
	Threads int64 `json:"threads"`
	Taps    int64 `json:"taps"`
}

func (l Limits) eventsBurst() float64 { return burst(l.EventsBurst, l.EventsPerSec) }
func (l Limits) bytesBurst() float64  { return burst(l.BytesBurst, l.BytesPerSec) }

func burst(b int64, rate float64) float64 {
	if b > 0 {
		return float64(b)
	}
	return math.Max(1, math.Ceil(rate))
}

func (l Limits) validate() error {
	switch {
	case l.EventsPerSec < 0 || math.IsNaN(l.EventsPerSec) || math.IsInf(l.EventsPerSec, 0),
		l.BytesPerSec < 0 || math.IsNaN(l.BytesPerSec) || math.IsInf(l.BytesPerSec, 0):
		return errors.New("a rate is negative or not a number")
	case l.EventsBurst < 0 || l.BytesBurst < 0 || l.BodyBytesInFlight < 0 || l.EventsRetained < 0 ||
		l.Streams < 0 || l.Threads < 0 || l.Taps < 0:
		return errors.New("a limit is negative")
	}
	return nil
}

// Kind names a quota. Its String is the name every door uses: the JSON
// body's "quota", the RateLimit policy name, the dead letter's reason and
// the metrics' "quota" label.
type Kind uint8

// The quotas.
const (
	KindEvents   Kind = iota + 1 // events per second
	KindBytes                    // event bytes per second
	KindBody                     // request body bytes in flight
	KindRetained                 // events retained in the log
	KindStreams                  // open streams
	KindThreads                  // threads subscribed
	KindTaps                     // tap subscriptions
	KindTenants                  // the Limiter's tenant table is full of tenants holding something
)

var kindNames = [...]string{"", "events_per_sec", "bytes_per_sec", "body_bytes_in_flight", "events_retained",
	"streams", "threads", "taps", "tenants"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds lists every Kind, for tests and metric pre-registration.
func Kinds() []Kind {
	return []Kind{KindEvents, KindBytes, KindBody, KindRetained, KindStreams, KindThreads, KindTaps, KindTenants}
}

// Config is a Limiter's configuration. DefaultConfig returns the defaults.
type Config struct {
	// Default applies to every tenant without an override.
	Default Limits
	// Tenants are the overrides, whole Limits per tenant (ParseFile fills
	// the fields an override leaves out from Default).
	Tenants map[string]Limits
	// IdleAfter: a tenant holding nothing and unused for this long is
	// forgotten, once its buckets are full again (a burst may take longer
	// to refill), so that forgetting one (a full bucket when next seen)
	// admits nothing more.
	IdleAfter time.Duration
	// MaxTenants bounds the tenants the Limiter keeps state for.
	MaxTenants int
	// RetainedEvery is how often the pipeline counts each tenant's
	// retained messages (pipeline.RetainedCounter; 0: 10 s).
	RetainedEvery time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// DefaultConfig returns the defaults: no limits, tenants forgotten after 10
// minutes idle, at most 100,000 remembered, retained messages counted every
// 10 s.
func DefaultConfig() Config {
	return Config{IdleAfter: 10 * time.Minute, MaxTenants: 100_000, RetainedEvery: 10 * time.Second}
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("quota: bad config")

// Validate checks the limits and bounds.
func (c *Config) Validate() error {
	if err := c.Default.validate(); err != nil {
		return fmt.Errorf("%w: default: %v", ErrConfig, err)
	}
	for t, l := range c.Tenants {
		if err := l.validate(); err != nil {
			return fmt.Errorf("%w: tenant %q: %v", ErrConfig, truncate(t), err)
		}
	}
	if c.IdleAfter <= 0 || c.MaxTenants < 1 {
		return fmt.Errorf("%w: idle after %v, max tenants %d", ErrConfig, c.IdleAfter, c.MaxTenants)
	}
	return nil
}

// Retained reports whether any tenant has an events-retained quota (a
// counter is needed).
func (c *Config) Retained() bool {
	if c.Default.EventsRetained > 0 {
		return true
	}
	for _, l := range c.Tenants {
		if l.EventsRetained > 0 {
			return true
		}
	}
	return false
}

// For returns the limits of tenant.
func (c *Config) For(tenant string) Limits {
	if l, ok := c.Tenants[tenant]; ok {
		return l
	}
	return c.Default
}

// File is the format of an overrides file (--quota-file):
//
//	{
//	  "default": {"eventsPerSec": 500, "bodyBytesInFlight": 67108864},
//	  "tenants": {
//	    "acme":   {"eventsPerSec": 5000, "eventsBurst": 10000},
//	    "globex": {"streams": 50, "taps": 0}
//	  }
//	}
//
// Both members are optional and take the Limits fields by their JSON names.
// "default" changes only the fields it names (the rest keep the values from
// the flags); each tenant's object changes only the fields it names of the
// resulting default. 0 is unlimited, so {"taps": 0} lifts the tap limit for
// that tenant. Unknown fields are an error, so a typo is not a silent no-op.
type File struct {
	Default json.RawMessage            `json:"default"`
	Tenants map[string]json.RawMessage `json:"tenants"`
}

// ParseFile applies an overrides file (see File) to c: its default over
// c.Default, and one override per tenant over that.
func (c *Config) ParseFile(data []byte) error {
	var f File
	if err := strictUnmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: quota file: %v", ErrConfig, err)
	}
	if len(f.Default) > 0 {
		if err := strictUnmarshal(f.Default, &c.Default); err != nil {
			return fmt.Errorf("%w: quota file default: %v", ErrConfig, err)
		}
	}
	if len(f.Tenants) > 0 {
		c.Tenants = make(map[string]Limits, len(f.Tenants))
	}
	for t, raw := range f.Tenants {
		l := c.Default
		if err := strictUnmarshal(raw, &l); err != nil {
			return fmt.Errorf("%w: quota file tenant %q: %v", ErrConfig, truncate(t), err)
		}
		c.Tenants[t] = l
	}
	return c.Validate()
}

func strictUnmarshal(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
