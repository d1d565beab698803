package wire

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Subject layout (broad to narrow, tenant first, so that a tenant's traffic is
// one wildcard and another tenant's never matches it):
//
//	agui.<tenant>.<thread>.events        what agents publish (stream AGUI_EVENTS)
//	aguip.<p>.<tenant>.<thread>          the same message as stored: the stream's
//	                                     SubjectTransform adds the partition p
//	view.<tenant>.<thread>               view frames (core NATS)
//	tc.snap.<p>.<tenant>.<thread>        snapshot requests (request-reply)
//	tc.part.<responder>.<reply>          the next window of a large reply
//	                                     (responder.go; internal, no tenant)
//	dlq.<tenant>.<thread>                dead letters (core NATS)
//	tap.<tenant>.<TYPE>.<thread>         analytics tap: accepted, normalized events
//	tap.<tenant>.RUN_SUMMARY.<thread>    analytics tap: one summary per finished run
//
// <thread> is always a thread token (EncodeThread), never the raw id.

// Subject prefixes, fixed tokens and limits.
const (
	EventsPrefix   = "agui"        // agui.<tenant>.<thread>.events
	EventsSuffix   = "events"      // last token of an event subject
	StoredPrefix   = "aguip"       // aguip.<p>.<tenant>.<thread>
	ViewPrefix     = "view"        // view.<tenant>.<thread>
	SnapPrefix     = "tc.snap"     // tc.snap.<p>.<tenant>.<thread>
	DLQPrefix      = "dlq"         // dlq.<tenant>.<thread>
	TapPrefix      = "tap"         // tap.<tenant>.<TYPE>.<thread>
	RunSummaryType = "RUN_SUMMARY" // the tap's pseudo event type for run summaries
	EventsWildcard = "agui.*.*.events"
	// MaxThreadIDLen bounds a thread id in bytes; MaxTenantLen a tenant name.
	MaxThreadIDLen  = 1024
	MaxTenantLen    = 63
	threadEscape    = '='
	threadEscapeStr = "="
)

// Errors returned by the subject functions.
var (
	ErrBadTenant  = errors.New("wire: invalid tenant name")
	ErrBadThread  = errors.New("wire: invalid thread token")
	ErrBadSubject = errors.New("wire: malformed subject")
	ErrThreadLen  = errors.New("wire: thread id too long")
)

// ValidTenant reports whether s is a valid tenant name: 1 to 63 characters
// from [a-z0-9_-], starting with [a-z0-9]. Tenants are names an operator
// chooses, not wire data, so they are validated, never escaped: a tenant is
// used verbatim as a subject token and a KV key part.
func ValidTenant(s string) error {
	if len(s) == 0 || len(s) > MaxTenantLen {
		return fmt.Errorf("%w: %q", ErrBadTenant, truncate(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '-'))
		if !ok {
			return fmt.Errorf("%w: %q", ErrBadTenant, truncate(s))
		}
	}
	return nil
}

// ValidThread reports whether id can name a thread: 1 to MaxThreadIDLen
// bytes of valid UTF-8. AG-UI allows any string as a threadId, the empty one
// too (envelope.md §4), but a Threadcast thread is also a URL path segment
// and a JSON string in every view and listing: an empty id addresses no
// thread in the REST API, and bytes that are not UTF-8 cannot travel in JSON
// (they would read back as U+FFFD, another thread). Such ids are refused
// where a subject is made (EventSubject) and where one is read
// (DecodeThread), so that no thread exists that cannot be read.
func ValidThread(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the empty thread id", ErrBadThread)
	case len(id) > MaxThreadIDLen:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrThreadLen, len(id), MaxThreadIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadThread, truncate(id))
	}
	return nil
}

// IsToken reports whether id can be used as its own token: non-empty, only
// [A-Za-z0-9_-]. (Names that go into subjects or KV keys verbatim, such as
// consumer prefixes, must be tokens too.) Such a token cannot start with the escape marker '=', which
// is outside the set, so the readable and escaped forms never collide.
func IsToken(id string) bool {
	if len(id) == 0 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// EncodeThread returns the subject token for the opaque thread id: the id
// itself when it is token-safe ([A-Za-z0-9_-]+), else '=' followed by the
// unpadded base64url of its bytes ("=" alone for the empty id).
//
// Why: thread ids come from the wire. Used raw, "a.b" would be two tokens and
// "*" or ">" a wildcard, so a publisher could write into, or a subscriber read,
// another thread. The token alphabet [A-Za-z0-9_=-] has no separator, no
// wildcard and no whitespace, is valid in a subject AND in a JetStream KV key
// (which allows only [-/_=.a-zA-Z0-9]), and is reversible (DecodeThread).
// The common case — UUIDs, ULIDs, slugs — stays readable in `nats sub`.
//
// Ids longer than MaxThreadIDLen are the caller's to reject (EventSubject
// does); EncodeThread itself encodes any length.
func EncodeThread(id string) string {
	if IsToken(id) {
		return id
	}
	return threadEscapeStr + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// AppendThreadToken appends EncodeThread(id) to dst without allocating when
// dst has room.
func AppendThreadToken(dst []byte, id string) []byte {
	if IsToken(id) {
		return append(dst, id...)
	}
	dst = append(dst, threadEscape)
	n := base64.RawURLEncoding.EncodedLen(len(id))
	dst = growBytes(dst, n)
	base64.RawURLEncoding.Encode(dst[len(dst)-n:], []byte(id))
	return dst
}

func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*len(b)+n)
	copy(nb, b)
	return nb
}

// DecodeThread is the inverse of EncodeThread. It rejects every token that
// EncodeThread cannot produce (so each id has exactly one token): an escaped
// token whose payload is not canonical unpadded base64url, or whose id would
// have been token-safe, and an unescaped token with characters outside
// [A-Za-z0-9_-]; and every token of an id ValidThread refuses ("=", the
// empty id; ids that are not UTF-8 or too long).
func DecodeThread(tok string) (string, error) {
	if len(tok) > 0 && tok[0] == threadEscape {
		b, err := base64.RawURLEncoding.Strict().DecodeString(tok[1:])
		if err != nil || IsToken(string(b)) {
			return "", fmt.Errorf("%w: %q", ErrBadThread, truncate(tok))
		}
		if err := ValidThread(string(b)); err != nil {
			return "", fmt.Errorf("token %q: %w", truncate(tok), err)
		}
		return string(b), nil
	}
	if !IsToken(tok) {
		return "", fmt.Errorf("%w: %q", ErrBadThread, truncate(tok))
	}
	if len(tok) > MaxThreadIDLen {
		return "", fmt.Errorf("%w: %d bytes (max %d)", ErrThreadLen, len(tok), MaxThreadIDLen)
	}
	return tok, nil
}

// EventSubject returns the subject agents publish a thread's events on:
// agui.<tenant>.<EncodeThread(thread)>.events.
func EventSubject(tenant, thread string) (string, error) {
	if err := ValidTenant(tenant); err != nil {
		return "", err
	}
	if err := ValidThread(thread); err != nil {
		return "", err
	}
	return EventsPrefix + "." + tenant + "." + EncodeThread(thread) + "." + EventsSuffix, nil
}

// ParseEventSubject splits agui.<tenant>.<token>.events into the tenant and
// the thread token (not decoded; see DecodeThread). It checks the tenant and
// the token's alphabet.
func ParseEventSubject(subj string) (tenant, token string, err error) {
	rest, ok := strings.CutPrefix(subj, EventsPrefix+".")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadSubject, truncate(subj))
	}
	rest, ok = strings.CutSuffix(rest, "."+EventsSuffix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadSubject, truncate(subj))
	}
	return splitTenantToken(rest, subj)
}

// ParseStoredSubject splits aguip.<p>.<tenant>.<token>, the subject of an
// event as stored in the stream, into its parts.
func ParseStoredSubject(subj string) (part int, tenant, token string, err error) {
	return parsePartitioned(StoredPrefix, subj)
}

// parsePartitioned splits <prefix>.<p>.<tenant>.<token>.
func parsePartitioned(prefix, subj string) (part int, tenant, token string, err error) {
	rest, ok := strings.CutPrefix(subj, prefix+".")
	if !ok {
		return 0, "", "", fmt.Errorf("%w: %q", ErrBadSubject, truncate(subj))
	}
	ps, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", "", fmt.Errorf("%w: %q", ErrBadSubject, truncate(subj))
	}
	part, perr := strconv.Atoi(ps)
	if perr != nil || part < 0 {
		return 0, "", "", fmt.Errorf("%w: %q", ErrBadSubject, truncate(subj))
	}
	tenant, token, err = splitTenantToken(rest, subj)
	return part, tenant, token, err
}

// ParseSnapSubject splits tc.snap.<p>.<tenant>.<token>, the subject of a
// snapshot request, into its parts.
func ParseSnapSubject(subj string) (part int, tenant, token string, err error) {
	return parsePartitioned(SnapPrefix, subj)
}

func splitTenantToken(rest, subj string) (tenant, token string, err error) {
	tenant, token, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(token, '.') >= 0 {
		return "", "", fmt.Errorf("%w: %q", ErrBadSubject, truncate(subj))
	}
	if err := ValidTenant(tenant); err != nil {
		return "", "", err
	}
	if _, err := DecodeThread(token); err != nil {
		return "", "", err
	}
	return tenant, token, nil
}

// Partition returns the partition in [0, parts) of a thread, computed exactly
// as nats-server computes {{partition(parts,1,2)}} in the stream's subject
// transform: FNV-1a (32 bit) over the tenant token followed directly by the
// thread token (no separator), modulo parts. (nats-server
// server/subject_transform.go, getHashPartition.) Fanout uses it to address
// snapshot requests to the owning partition; the equality with the server is
// tested against a real server (pipeline's TestPartitionMatchesServer: this
// package links no server).
//
// The stable, server-side hash is why partitioning is done by the stream and
// not by clients: a plain `nats pub agui.acme.t1.events` lands in the right
// partition, and no publisher can put a thread in the wrong one.
func Partition(tenant, threadToken string, parts int) int {
	if parts <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	_, _ = h.Write([]byte(threadToken))
	return int(h.Sum32() % uint32(parts))
}

// StoredSubject returns aguip.<p>.<tenant>.<token>, the subject under which
// the stream stores the events of that thread.
func StoredSubject(part int, tenant, token string) string {
	return StoredPrefix + "." + strconv.Itoa(part) + "." + tenant + "." + token
}

// PartitionFilter returns aguip.<p>.>, the filter subject of partition p's
// consumer.
func PartitionFilter(part int) string {
	return StoredPrefix + "." + strconv.Itoa(part) + ".>"
}

// ViewSubject returns view.<tenant>.<token>, where frames of a thread go.
func ViewSubject(tenant, token string) string {
	return ViewPrefix + "." + tenant + "." + token
}

// SnapSubject returns tc.snap.<p>.<tenant>.<token>: the request subject of a
// thread's snapshot, answered by the instance owning partition p.
func SnapSubject(part int, tenant, token string) string {
	return SnapPrefix + "." + strconv.Itoa(part) + "." + tenant + "." + token
}

// SnapPartitionWildcard returns tc.snap.<p>.*.*, what the owner of partition
// p subscribes to.
func SnapPartitionWildcard(part int) string {
	return SnapPrefix + "." + strconv.Itoa(part) + ".*.*"
}

// DLQSubject returns dlq.<tenant>.<token>.
func DLQSubject(tenant, token string) string {
	return DLQPrefix + "." + tenant + "." + token
}

// TapSubject returns tap.<tenant>.<eventType>.<token>; eventType is an AG-UI
// type name (upper case, token-safe) or RunSummaryType.
func TapSubject(tenant, eventType, token string) string {
	return TapPrefix + "." + tenant + "." + eventType + "." + token
}

// StreamSubjectTransform returns the destination of the stream's subject
// transform for parts partitions:
// aguip.{{partition(parts,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.
func StreamSubjectTransform(parts int) string {
	return StoredPrefix + ".{{partition(" + strconv.Itoa(parts) + ",1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"
}

// truncate shortens a hostile input quoted in an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// AgentInboxRoot starts the reply subjects of an agent's connection when the
// bus authorizes agents by token: an agent of tenant T receives its replies
// (JetStream publish acks) under InboxPrefix(T) = _INBOX_T, and may
// subscribe to nothing else, so no tenant can read another's replies. The
// root differs from nats.go's default "_INBOX." so that no service inbox
// falls under any agent's prefix.
const AgentInboxRoot = "_INBOX_"

// InboxPrefix returns the inbox prefix an agent connection of tenant uses
// (nats.CustomInboxPrefix): _INBOX_<tenant>, one subject token.
func InboxPrefix(tenant string) (string, error) {
	if err := ValidTenant(tenant); err != nil {
		return "", err
	}
	return AgentInboxRoot + tenant, nil
}
