package pipeline

import "github.com/threadcast/threadcast/subject"

// NOTE: the subject, key and thread-token vocabulary lives in package
// subject (standard library only, so that the agent SDK shares it without
// linking nats-server). The names below keep pipeline's API: each is the
// subject package's, unchanged. Headers, dead-letter kinds and the stream
// and bucket defaults are pipeline's own.

// Subject prefixes, fixed tokens and limits (see package subject).
const (
	EventsPrefix   = subject.EventsPrefix
	EventsSuffix   = subject.EventsSuffix
	StoredPrefix   = subject.StoredPrefix
	ViewPrefix     = subject.ViewPrefix
	SnapPrefix     = subject.SnapPrefix
	DLQPrefix      = subject.DLQPrefix
	TapPrefix      = subject.TapPrefix
	RunSummaryType = subject.RunSummaryType
	EventsWildcard = subject.EventsWildcard
	MaxThreadIDLen = subject.MaxThreadIDLen
	MaxTenantLen   = subject.MaxTenantLen

	DefaultStream = "AGUI_EVENTS"
	// DefaultDeadLetters is the default stream of dead letters.
	DefaultDeadLetters = "THREADCAST_DEADLETTERS"
	DefaultViewsKV     = "THREADCAST_VIEWS"
	// DefaultParts is the default number of partitions P. Each partition an
	// instance owns costs a durable consumer, whose state the server
	// persists up to 10 times a second and which scans the stream for its
	// filter: measured on one instance (BenchmarkIngest, CPU per event), P=64
	// costs a third more than P=16, and P=8 no less than P=16. 16 allows up
	// to 16 instances.
	DefaultParts = 16
)

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
	// else the time ingest applied it).
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

// Errors returned by the subject functions (package subject's).
var (
	ErrBadTenant  = subject.ErrBadTenant
	ErrBadThread  = subject.ErrBadThread
	ErrBadSubject = subject.ErrBadSubject
	ErrThreadLen  = subject.ErrThreadLen
)

// ValidTenant is subject.ValidTenant.
func ValidTenant(s string) error { return subject.ValidTenant(s) }

// EncodeThread is subject.EncodeThread: the subject token of a thread id.
func EncodeThread(id string) string { return subject.EncodeThread(id) }

// AppendThreadToken is subject.AppendThreadToken.
func AppendThreadToken(dst []byte, id string) []byte { return subject.AppendThreadToken(dst, id) }

// DecodeThread is subject.DecodeThread.
func DecodeThread(tok string) (string, error) { return subject.DecodeThread(tok) }

// EventSubject is subject.EventSubject.
func EventSubject(tenant, thread string) (string, error) { return subject.EventSubject(tenant, thread) }

// ParseEventSubject is subject.ParseEventSubject.
func ParseEventSubject(subj string) (tenant, token string, err error) {
	return subject.ParseEventSubject(subj)
}

// ParseStoredSubject is subject.ParseStoredSubject.
func ParseStoredSubject(subj string) (part int, tenant, token string, err error) {
	return subject.ParseStoredSubject(subj)
}

// Partition is subject.Partition: the partition of a thread, as the stream's
// subject transform computes it.
func Partition(tenant, threadToken string, parts int) int {
	return subject.Partition(tenant, threadToken, parts)
}

// StoredSubject is subject.StoredSubject.
func StoredSubject(part int, tenant, token string) string {
	return subject.StoredSubject(part, tenant, token)
}

// PartitionFilter is subject.PartitionFilter.
func PartitionFilter(part int) string { return subject.PartitionFilter(part) }

// ViewSubject is subject.ViewSubject.
func ViewSubject(tenant, token string) string { return subject.ViewSubject(tenant, token) }

// SnapSubject is subject.SnapSubject.
func SnapSubject(part int, tenant, token string) string {
	return subject.SnapSubject(part, tenant, token)
}

// SnapPartitionWildcard is subject.SnapPartitionWildcard.
func SnapPartitionWildcard(part int) string { return subject.SnapPartitionWildcard(part) }

// DLQSubject is subject.DLQSubject.
func DLQSubject(tenant, token string) string { return subject.DLQSubject(tenant, token) }

// TapSubject is subject.TapSubject.
func TapSubject(tenant, eventType, token string) string {
	return subject.TapSubject(tenant, eventType, token)
}

// CheckpointKey is subject.CheckpointKey.
func CheckpointKey(tenant, token string) string { return subject.CheckpointKey(tenant, token) }

// ParseCheckpointKey is subject.ParseCheckpointKey.
func ParseCheckpointKey(key string) (tenant, token string, err error) {
	return subject.ParseCheckpointKey(key)
}

// StreamSubjectTransform is subject.StreamSubjectTransform.
func StreamSubjectTransform(parts int) string { return subject.StreamSubjectTransform(parts) }

// tokenSafe reports whether s can be used verbatim as a subject token.
func tokenSafe(s string) bool { return subject.IsToken(s) }

// truncate shortens a hostile input quoted in an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
