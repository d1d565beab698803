package quota

import "time"

// Window is the rate check of a consumer that cannot refuse, only shed: the
// NATS ingest, whose messages are stored before it sees them. It counts a
// tenant's events and bytes per one-second window of the messages' stored
// timestamps, and admits a message while the window's counts stay within
// EventsPerSec + EventsBurst events and BytesPerSec + BytesBurst bytes (what
// the token bucket of Take can admit in any one second, so that traffic a
// Limiter admitted at the bridge is not shed here).
//
// An event the caller marks structural (one that opens or closes
// something, whose loss would break the protocol state of what follows) is
// admitted up to twice those budgets: shedding content degrades a thread,
// shedding its structure would end it. Past twice the budget everything is
// shed.
//
// Its decisions depend only on the sequence of (tenant, timestamp, size) it
// is shown: replaying the same messages from the start of a window makes
// the same decisions. A timestamp older than the current window counts in
// the current window (stored timestamps are non-decreasing in a stream but
// for clock steps).
//
// A Window is owned by one goroutine (one per partition in the pipeline) and
// is not safe for concurrent use. It keeps one entry per tenant seen in the
// current window only.
type Window struct {
	cur int64 // the current window, Unix seconds; 0: none yet
	m   map[string]*windowCount
}

type windowCount struct{ events, bytes int64 }

// Admit counts a message of tenant stored at at, holding events events and
// bytes bytes, against lim: 0 and true when within both rates (the message
// is counted), else the quota exceeded and false (the message is not
// counted, so it does not eat the budget of the events after it).
func (w *Window) Admit(lim Limits, tenant string, at time.Time, events, bytes int64, structural bool) (Kind, bool) {
	if lim.EventsPerSec <= 0 && lim.BytesPerSec <= 0 {
		return 0, true
	}
	if sec := at.Unix(); sec > w.cur {
		w.cur = sec
		clear(w.m)
	}
	if w.m == nil {
		w.m = make(map[string]*windowCount)
	}
	c := w.m[tenant]
	if c == nil {
		c = &windowCount{}
		w.m[tenant] = c
	}
	f := 1.0
	if structural {
		f = 2
	}
	if lim.EventsPerSec > 0 && float64(c.events+events) > f*(lim.EventsPerSec+lim.eventsBurst()) {
		return KindEvents, false
	}
	// As in Take, a message larger than the whole budget passes alone.
	if budget := f * (lim.BytesPerSec + lim.bytesBurst()); lim.BytesPerSec > 0 && float64(c.bytes+bytes) > budget && c.bytes > 0 {
		return KindBytes, false
	}
	c.events += events
	c.bytes += bytes
	return 0, true
}

// Exhausted reports whether Admit would refuse even a structural event of
// bytes bytes from tenant at at, without counting anything: a caller can
// then shed an event without decoding it. It returns the quota, or 0.
func (w *Window) Exhausted(lim Limits, tenant string, at time.Time, bytes int64) Kind {
	if lim.EventsPerSec <= 0 && lim.BytesPerSec <= 0 || at.Unix() > w.cur {
		return 0 // unlimited, or a new window: nothing counted yet
	}
	c := w.m[tenant]
	if c == nil {
		return 0
	}
	if lim.EventsPerSec > 0 && float64(c.events+1) > 2*(lim.EventsPerSec+lim.eventsBurst()) {
		return KindEvents
	}
	if lim.BytesPerSec > 0 && c.bytes > 0 && float64(c.bytes+bytes) > 2*(lim.BytesPerSec+lim.bytesBurst()) {
		return KindBytes
	}
	return 0
}

// Len is the number of tenants counted in the current window.
func (w *Window) Len() int { return len(w.m) }
