package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/threadcast/threadcast/jsondoc"
)

// Check is the correctness verdict of a run: every thread's REST view
// equals the offline reduction of what the agents stored, and every
// subscriber's fold equals its thread's REST view (view mode: the whole
// document; agui mode: messages and state, which is what an AG-UI stream
// restates — a late joiner's stream cannot restate the run history), with
// no gap, duplicate or fold error seen on the way.
type Check struct {
	Pass            bool     `json:"pass"`
	Settled         bool     `json:"settled"`
	Threads         int      `json:"threads"`
	ThreadsTainted  int      `json:"threadsTainted"`  // a publish failed: not checkable
	ThreadsMismatch int      `json:"threadsMismatch"` // REST view ≠ offline reduction
	Subscribers     int      `json:"subscribers"`
	SubsChecked     int      `json:"subscribersChecked"`
	SubsMismatch    int      `json:"subscribersMismatch"`
	SubsNoView      int      `json:"subscribersNoView"`
	Gaps            uint64   `json:"gaps"`
	Duplicates      uint64   `json:"duplicates"`
	FoldErrors      uint64   `json:"foldErrors"`
	Failures        []string `json:"failures,omitempty"` // the first few, with reasons
}

func (c *Check) fail(format string, args ...any) {
	if len(c.Failures) < 20 {
		c.Failures = append(c.Failures, fmt.Sprintf(format, args...))
	}
}

// check compares, once everything stopped; see Check.
func (r *runner) check(ctx context.Context) Check {
	c := Check{Threads: len(r.threads), Subscribers: len(r.subs)}
	views := make(map[*threadInfo]json.RawMessage, len(r.threads))
	for _, th := range r.threads {
		if _, tainted := th.state(); tainted {
			c.ThreadsTainted++
			continue
		}
		rv, err := r.restView(ctx, th)
		if err != nil {
			c.ThreadsMismatch++
			c.fail("thread %s: %v", th.thread, err)
			continue
		}
		views[th] = rv.View
		off := th.offline.AppendView(nil)
		if eq, err := jsondoc.Equal(rv.View, off); err != nil || !eq {
			c.ThreadsMismatch++
			c.fail("thread %s: REST view (seq %d) differs from the offline reduction (seq %d)", th.thread, rv.Seq, th.offline.Seq())
		}
	}
	for _, s := range r.subs {
		c.Gaps += s.gaps
		c.Duplicates += s.dups
		c.FoldErrors += s.foldFatal
		if s.foldErr != "" {
			c.fail("subscriber %d (%s, %s): fold error: %s", s.id, s.v, s.th.thread, s.foldErr)
		}
		want, ok := views[s.th]
		if !ok {
			continue
		}
		c.SubsChecked++
		ok, why := s.matches(want)
		s.matched = ok
		if !ok {
			if why == "no view" {
				c.SubsNoView++
			}
			c.SubsMismatch++
			c.fail("subscriber %d (%s, %s): %s", s.id, s.v, s.th.thread, why)
		}
	}
	c.Pass = c.ThreadsMismatch == 0 && c.ThreadsTainted == 0 && c.SubsMismatch == 0 &&
		c.Gaps == 0 && c.Duplicates == 0 && c.FoldErrors == 0
	return c
}

// matches compares the subscriber's fold with the thread's REST view.
func (s *sub) matches(want json.RawMessage) (bool, string) {
	if s.v.view() {
		if !s.vd.have {
			return false, "no view"
		}
		got, err := s.vd.appendJSON(nil)
		if err != nil {
			return false, err.Error()
		}
		if eq, _ := jsondoc.Equal(got, want); !eq {
			return false, fmt.Sprintf("view (seq %d) differs from the REST view", s.vd.seq)
		}
		return true, ""
	}
	if s.agui == nil {
		return false, "no view"
	}
	var w struct {
		Messages json.RawMessage `json:"messages"`
		State    json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return false, err.Error()
	}
	if eq, _ := jsondoc.Equal(s.agui.AppendMessages(nil), w.Messages); !eq {
		return false, "messages differ from the REST view"
	}
	if eq, _ := jsondoc.Equal(s.agui.AppendState(nil), w.State); !eq {
		return false, "state differs from the REST view"
	}
	return true, ""
}

// Quantiles summarises a histogram, in milliseconds.
type Quantiles struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"meanMs"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	P999  float64 `json:"p999Ms"`
	Max   float64 `json:"maxMs"`
}

func quantiles(h *Histogram) Quantiles {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return Quantiles{Count: h.Count(), Mean: h.Mean() / 1e6, P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)),
		P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

// SecondOut is one second of the series.
type SecondOut struct {
	T        int     `json:"t"`
	EventsIn uint64  `json:"eventsIn"`
	MsgsOut  uint64  `json:"msgsOut"`
	BytesOut uint64  `json:"bytesOut"`
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	Max      float64 `json:"maxMs"`
}

// Result is a finished run, as report.json holds it.
type Result struct {
	Config        Config               `json:"config"`
	Command       string               `json:"command"`
	Start         time.Time            `json:"start"`
	LoadAvg       string               `json:"loadAvg"`      // /proc/loadavg at the end of the load phase
	ProcessCores  float64              `json:"processCores"` // CPU used by this process (generator and embedded system) during the load phase, in cores
	Published     float64              `json:"publishSeconds"`
	EventsIn      uint64               `json:"eventsIn"`
	EventsPerSec  float64              `json:"eventsPerSec"`
	MsgsOut       uint64               `json:"msgsOut"`
	BytesOut      uint64               `json:"bytesOut"`
	MsgsPerSec    float64              `json:"msgsPerSec"`
	BytesPerSec   float64              `json:"bytesPerSec"`
	Latency       Quantiles            `json:"latency"`
	ByVariant     map[string]Quantiles `json:"latencyByVariant"`
	Subscribers   map[string]int       `json:"subscribersByVariant"`
	Resyncs       uint64               `json:"resyncs"`
	Reconnects    uint64               `json:"reconnects"`
	CatchUp       uint64               `json:"catchUpDeliveries"` // events published before the connection that delivered them
	Errors        uint64               `json:"errors"`
	ErrorSamples  map[string]int       `json:"errorSamples,omitempty"`
	PublishErrors uint64               `json:"publishErrors"`
	// PublishErrorSamples counts failed publishes by cause.
	PublishErrorSamples map[string]int      `json:"publishErrorSamples,omitempty"`
	FoldWarnings        uint64              `json:"foldWarnings"`
	Events              []string            `json:"events"`
	StallTraces         []string            `json:"stallTraces,omitempty"` // --trace-stalls: the traces written
	Series              []SecondOut         `json:"series"`
	Check               Check               `json:"check"`
	ServerMetrics       map[string]float64  `json:"serverMetrics,omitempty"`
	Stages              []StageOut          `json:"stages,omitempty"` // the server's latency budget
	Slow                map[string]*SlowOut `json:"slow,omitempty"`   // by mode: "agui", "view"
}

// SlowOut is what the slow subscribers got, beside the others of their
// threads.
type SlowOut struct {
	Slow       int    `json:"slow"`
	Equal      int    `json:"equal"` // final view = REST view
	Resyncs    uint64 `json:"resyncs"`
	Reconnects uint64 `json:"reconnects"`
	// Per subscriber, summed over the slow subscribers that have a
	// subscriber of the same thread and mode (agui or view) that is not
	// slow: what each slow one received, and the mean of what those
	// others received.
	Paired    int     `json:"paired"`
	SlowMsgs  uint64  `json:"slowMsgs"`
	SlowBytes uint64  `json:"slowBytes"`
	FastMsgs  float64 `json:"fastMsgs"`
	FastBytes float64 `json:"fastBytes"`
}

// slowOut summarises the slow subscribers of each mode (nil when there are
// none).
func (r *runner) slowOut() map[string]*SlowOut {
	out := map[string]*SlowOut{}
	for _, mode := range []string{"agui", "view"} {
		if o := r.slowOf(mode == "view"); o != nil {
			out[mode] = o
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (r *runner) slowOf(view bool) *SlowOut {
	var o SlowOut
	for _, s := range r.subs {
		if !s.slow || s.v.view() != view {
			continue
		}
		o.Slow++
		if s.matched {
			o.Equal++
		}
		o.Resyncs += s.resyncs
		o.Reconnects += s.reconnects
		var n, msgs, bytes float64
		for _, f := range r.subs {
			if !f.slow && f.th == s.th && f.v.view() == s.v.view() {
				n++
				msgs += float64(f.msgs)
				bytes += float64(f.bytes)
			}
		}
		if n > 0 {
			o.Paired++
			o.SlowMsgs += s.msgs
			o.SlowBytes += s.bytes
			o.FastMsgs += msgs / n
			o.FastBytes += bytes / n
		}
	}
	if o.Slow == 0 {
		return nil
	}
	return &o
}

func (r *runner) result(start time.Time, published time.Duration) *Result {
	res := &Result{
		Config: r.cfg, Start: start, Published: published.Seconds(), LoadAvg: loadAvg(),
		EventsIn: r.stats.eventsIn.Load(), MsgsOut: r.stats.msgsOut.Load(), BytesOut: r.stats.bytesOut.Load(),
		Errors: r.stats.errors.Load(), PublishErrors: r.stats.publishErrors.Load(),
		ByVariant: map[string]Quantiles{}, Subscribers: map[string]int{}, Events: r.events, ErrorSamples: r.errLast,
		PublishErrorSamples: r.pubErrLast,
	}
	d := r.cfg.Duration.Seconds()
	res.EventsPerSec = float64(res.EventsIn) / d
	// Out rates over the load phase only: the settle phase is catch-up.
	var all Histogram
	for v, h := range r.hists {
		all.Merge(h)
		if h.Count() > 0 {
			res.ByVariant[variant(v).String()] = quantiles(h)
		}
	}
	res.Latency = quantiles(&all)
	for _, s := range r.subs {
		res.Subscribers[s.v.String()]++
		res.Resyncs += s.resyncs
		res.Reconnects += s.reconnects
		res.CatchUp += s.catchUp
		res.FoldWarnings += s.warnings
	}
	n := int(time.Since(start).Seconds()) + 1
	var outMsgs, outBytes uint64
	for i := 0; i < n && i < len(r.series.secs); i++ {
		sec := r.series.secs[i]
		so := SecondOut{T: i, EventsIn: sec.eventsIn.Load(), MsgsOut: sec.msgsOut.Load(), BytesOut: sec.bytesOut.Load(),
			P50: float64(sec.hist.Quantile(0.5)) / 1e6, P99: float64(sec.hist.Quantile(0.99)) / 1e6, Max: float64(sec.hist.Max()) / 1e6}
		res.Series = append(res.Series, so)
		if float64(i) < d {
			outMsgs += so.MsgsOut
			outBytes += so.BytesOut
		}
	}
	res.MsgsPerSec, res.BytesPerSec = float64(outMsgs)/d, float64(outBytes)/d
	return res
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// scrapeMetrics reads the fanout's resync and drop counters from /metrics
// (keyed "<name>{<labels>}", summed over the fanout nodes); best effort.
func (r *runner) scrapeMetrics() map[string]float64 {
	var out map[string]float64
	for _, base := range r.bases {
		if m := r.scrapeMetricsAt(base); m != nil {
			if out == nil {
				out = map[string]float64{}
			}
			for k, v := range m {
				out[k] += v
			}
		}
	}
	return out
}

func (r *runner) scrapeMetricsAt(base string) map[string]float64 {
	res, err := r.client.Get(base + "/metrics")
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"threadcast_fanout_resyncs_total", "threadcast_fanout_queue_drops_total",
			"threadcast_fanout_streams_ended_total", "threadcast_fanout_frames_received_total", "threadcast_fanout_bad_frames_total",
			"threadcast_fanout_snapshot_requests_total", "threadcast_fanout_requests_rejected_total",
			"threadcast_fanout_coalesced_total", "threadcast_fanout_coalesced_saved_bytes_total", "threadcast_fanout_paced_total",
			"threadcast_ingest_stage_seconds_bucket", "threadcast_fanout_stage_seconds_bucket",
			"threadcast_fanout_join_wait_seconds_bucket", "threadcast_fanout_join_seconds_bucket"} {
			if strings.HasPrefix(line, p) {
				if i := strings.LastIndexByte(line, ' '); i > 0 {
					if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
						out[line[:i]] = v
					}
				}
			}
		}
	}
	return out
}
