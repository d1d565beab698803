package wire

// Message headers. Tc-* headers are set by Threadcast on what it publishes;
// Threadcast-Batch and Nats-Msg-Id are set by publishers.
const (
	// HeaderBatch, optional on a published message, says it carries that many
	// events as JSONL (one JSON object per line, '\n'-separated, all of the
	// subject's thread). Ingest reads JSONL whether or not the header is
	// present; when present the count is checked and a mismatch is counted.
	HeaderBatch = "Threadcast-Batch"
	// HeaderMsgID is JetStream's de-duplication header (stream Duplicates window).
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderSeq is the stream sequence a frame or snapshot brings the view to,
	// or (on a dead letter) the stream sequence of the offending message.
	HeaderSeq = "Tc-Seq"
	// HeaderPrev is the HeaderSeq of the previous frame of the same thread
	// (0 for the first frame since the thread was loaded from nothing).
	HeaderPrev = "Tc-Prev"
	// HeaderSent is, on a frame, when ingest sent it (Unix ns, its clock):
	// what the fanout measures a frame's transit from.
	HeaderSent = "Tc-Sent"
	// HeaderErrorKind and HeaderError describe why a dead letter was rejected:
	// kind is one of the ErrKind* values, the text a truncated message.
	HeaderErrorKind = "Tc-Error-Kind"
	HeaderError     = "Tc-Error"
	// HeaderEventIndex is, on a dead letter cut from a batch, the 0-based
	// index of the event within the published message.
	HeaderEventIndex = "Tc-Event-Index"
	// HeaderQuota is, on a dead letter of kind ErrKindQuota, the quota the
	// event was shed over (a quota.Kind name: "events_per_sec", ...).
	HeaderQuota = "Tc-Quota"
	// HeaderStatus and HeaderLastEvent are the thread summary a checkpoint
	// carries in its KV message's headers (with HeaderSeq), so that a
	// listing reads status and last activity from headers alone, never the
	// records: the reducer status ("idle", "running", ...) and the Unix ms
	// time of the last applied event (its own timestamp when it has one,
	// else the time ingest applied it). A frame carries HeaderStatus too
	// (the body's "status"), so that the live listing reads it from any of
	// the frame's parts.
	HeaderStatus    = "Tc-Status"
	HeaderLastEvent = "Tc-Last-Event"
)

// Dead-letter kinds (the HeaderErrorKind values).
const (
	ErrKindDecode  = "decode"  // not JSON / not an event object
	ErrKindInvalid = "invalid" // schema or protocol violation (codec fatal or reducer reject)
	ErrKindSubject = "subject" // the subject itself is malformed (bad tenant or thread token)
	ErrKindTooBig  = "too-big" // over a configured limit
	ErrKindQuota   = "quota"   // shed over its tenant's quota (HeaderQuota names it)
)

// StageBuckets are the bucket bounds (seconds) of the stage histograms,
// threadcast_ingest_stage_seconds and threadcast_fanout_stage_seconds: 100 µs
// to 3.3 s, doubling, so that the stages of one event's latency can be
// read side by side.
var StageBuckets = func() []float64 {
	b := make([]float64, 16)
	for i, v := 0, 1e-4; i < len(b); i, v = i+1, v*2 {
		b[i] = v
	}
	return b
}()
