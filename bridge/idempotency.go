package bridge

// NOTE: Idempotency-Key for the HTTP bridge (draft-ietf-httpapi-
// idempotency-key-header). Two durable records make a retried request store
// nothing twice, on any node and across a restart:
//   - each event of a keyed request is published alone with the Nats-Msg-Id
//     tc-idem.<id>.<index>, id = SHA-256(tenant, thread, key): the stream
//     stores a given id once within its Duplicates window, so a retry of a
//     request that was cut (the client's connection, or the process) stores
//     only the events the first attempt did not;
//   - the first complete answer is kept in the KV bucket IdempotencyBucket
//     (key idem.<id>, with the SHA-256 of the body) for the same window: a
//     retry with the same body gets that answer again, without publishing;
//     one with another body is 422.
// A request with the key in flight on this bridge answers 409 to a second
// one (a process-local claim: two bridges may both run one, and the message
// ids still store each event once).

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/pipeline"
)

// HeaderIdempotencyKey is the request header naming a bridge request's
// idempotency key (an sf-string, "…"; a bare token is accepted too).
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderIdempotentReplay is set to "true" on an answer replayed from the
// record of an earlier request with the same key and body.
const HeaderIdempotentReplay = "Threadcast-Idempotent-Replay"

// DefaultIdempotencyBucket is the KV bucket of the bridge's first answers.
const DefaultIdempotencyBucket = "THREADCAST_IDEMPOTENCY"

// MaxIdempotencyKeyLen bounds an Idempotency-Key, in bytes (unquoted).
const MaxIdempotencyKeyLen = 255

// ErrIdempotencyKey is wrapped by the error of a malformed Idempotency-Key.
var ErrIdempotencyKey = errors.New("bridge: bad Idempotency-Key")

// IdempotencyKVConfig returns the configuration of the bucket of first
// answers: entries live for the stream's Duplicates window, the window in
// which a retry is recognised by either record.
// A zero Duplicates is the server's default window, 2 minutes.
func IdempotencyKVConfig(cfg *pipeline.Config) jetstream.KeyValueConfig {
	ttl := cfg.Duplicates
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	return jetstream.KeyValueConfig{
		Bucket:      DefaultIdempotencyBucket,
		Description: "Threadcast bridge: first answer per Idempotency-Key",
		History:     1,
		TTL:         ttl, // the records' size is bounded by the window times the keyed request rate
		MaxBytes:    -1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// EnsureIdempotencyBucket creates or updates the bucket of first answers
// (idempotent, like EnsureStreams) and returns it for Config.
func EnsureIdempotencyBucket(ctx context.Context, js jetstream.JetStream, cfg *pipeline.Config) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, IdempotencyKVConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("bridge: create/update bucket %s: %w", DefaultIdempotencyBucket, err)
	}
	return kv, nil
}

// parseIdempotencyKey returns the key of an Idempotency-Key field value: an
// sf-string (RFC 8941: "…" with \" and \\ escapes, printable ASCII), or,
// leniently, a bare run of visible ASCII. ok is false when there is none.
func parseIdempotencyKey(v string) (key string, ok bool, err error) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return "", false, nil
	}
	if v[0] != '"' {
		for i := 0; i < len(v); i++ {
			if v[i] <= ' ' || v[i] > '~' || v[i] == '"' || v[i] == '\\' {
				return "", true, fmt.Errorf("%w: byte %d of %q is not allowed (send an sf-string: \"…\")", ErrIdempotencyKey, i, truncate(v))
			}
		}
		key = v
	} else {
		var b strings.Builder
		i := 1
		for ; i < len(v) && v[i] != '"'; i++ {
			c := v[i]
			if c == '\\' {
				if i++; i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", true, fmt.Errorf("%w: bad escape in %q", ErrIdempotencyKey, truncate(v))
				}
				c = v[i]
			} else if c < ' ' || c > '~' {
				return "", true, fmt.Errorf("%w: byte %d of %q is not printable ASCII", ErrIdempotencyKey, i, truncate(v))
			}
			b.WriteByte(c)
		}
		if i != len(v)-1 {
			return "", true, fmt.Errorf("%w: %q is not one quoted string", ErrIdempotencyKey, truncate(v))
		}
		key = b.String()
	}
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return "", true, fmt.Errorf("%w: %d bytes (want 1 to %d)", ErrIdempotencyKey, len(key), MaxIdempotencyKeyLen)
	}
	return key, true, nil
}

// idemID names a (tenant, thread, key): tenants and threads never share
// one. It is keyed with the deployment's secret (IdempotencySecret): the
// event stream de-duplicates Nats-Msg-Ids across all tenants, so an id that
// anyone could compute from a tenant, thread and guessable key would let
// another tenant, publishing first with it, have that tenant's events
// dropped as duplicates, or learn from its own ack whether the key was used.
func idemID(secret []byte, tenant, thread, key string) string {
	h := hmac.New(sha256.New, secret)
	for _, s := range []string{tenant, thread, key} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil)[:20])
}

// IdempotencyMsgID is the Nats-Msg-Id of event index of a request to b with
// the idempotency key key for tenant and thread.
func (b *Bridge) IdempotencyMsgID(tenant, thread, key string, index int) string {
	return idemMsgID(idemID(b.cfg.IdempotencySecret, tenant, thread, key), index)
}

// idemSecretKey is the checkpoint bucket's key of IdempotencySecret's
// secret. Tenants never start with '_' (wire.ValidTenant): no checkpoint
// key collides.
const idemSecretKey = "_s.bridge-idempotency"

// MinIdempotencySecret is the shortest Config.IdempotencySecret accepted.
const MinIdempotencySecret = 16

// IdempotencySecret returns the secret that keys the ids of keyed requests
// (Config.IdempotencySecret), creating it on first use: 32 random bytes in
// cfg's checkpoint bucket (which EnsureStreams creates), which every ingest
// of the deployment shares, so that a retry reaching another bridge
// instance, or the same one restarted, gets the same ids, and which no
// tenant can read.
func IdempotencySecret(ctx context.Context, js jetstream.JetStream, cfg *pipeline.Config) ([]byte, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("bridge: the checkpoint bucket %s holds the idempotency secret: %w", cfg.Bucket, err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if _, err := kv.Create(ctx, idemSecretKey, secret); err == nil {
		return secret, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("bridge: create the idempotency secret: %w", err)
	}
	e, err := kv.Get(ctx, idemSecretKey)
	if err != nil {
		return nil, fmt.Errorf("bridge: read the idempotency secret: %w", err)
	}
	if len(e.Value()) < MinIdempotencySecret {
		return nil, fmt.Errorf("bridge: the idempotency secret in %s is %d bytes, want at least %d", cfg.Bucket, len(e.Value()), MinIdempotencySecret)
	}
	return e.Value(), nil
}

func idemMsgID(id string, index int) string { return "tc-idem." + id + "." + strconv.Itoa(index) }

// idemRecord is a first answer as the bucket keeps it.
type idemRecord struct {
	Body     string   `json:"body"` // hex SHA-256 of the request body
	Status   int      `json:"status"`
	Response Response `json:"response"`
}

// claim marks id in flight on this bridge; false if it already is.
func (b *Bridge) claim(id string) bool {
	b.idemMu.Lock()
	defer b.idemMu.Unlock()
	if _, busy := b.idemBusy[id]; busy {
		return false
	}
	b.idemBusy[id] = struct{}{}
	return true
}

func (b *Bridge) unclaim(id string) {
	b.idemMu.Lock()
	delete(b.idemBusy, id)
	b.idemMu.Unlock()
}

// idemStoreTimeout bounds one read or write of the bucket of first answers.
const idemStoreTimeout = 5 * time.Second

// loadRecord returns the first answer stored for id, nil when none is.
func (b *Bridge) loadRecord(ctx context.Context, id string) (*idemRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, idemStoreTimeout)
	defer cancel()
	e, err := b.cfg.Idempotency.Get(ctx, "idem."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bridge: idempotency record: %w", err)
	}
	var rec idemRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("bridge: idempotency record: %w", err)
	}
	return &rec, nil
}

func (b *Bridge) storeRecord(ctx context.Context, id string, rec idemRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, idemStoreTimeout)
	defer cancel()
	_, err = b.cfg.Idempotency.Put(ctx, "idem."+id, v)
	return err
}

// fingerprint is the running SHA-256 of what a request body yielded.
type fingerprint struct {
	r io.Reader
	h hash.Hash
}

func newFingerprint(r io.Reader) *fingerprint { return &fingerprint{r: r, h: sha256.New()} }

func (f *fingerprint) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	f.h.Write(p[:n])
	return n, err
}

func (f *fingerprint) sum() string { return hex.EncodeToString(f.h.Sum(nil)) }

// replayOrRefuse answers a keyed request whose key has a first answer: it
// reads the body (body, already bounded by MaxBodyBytes) to compare it with
// the first one's, and replays the first answer, or answers 422.
func (b *Bridge) replayOrRefuse(w http.ResponseWriter, fp *fingerprint, body io.Reader, rec *idemRecord) {
	var maxErr *http.MaxBytesError
	if _, err := io.Copy(io.Discard, body); err != nil && !errors.As(err, &maxErr) {
		b.fail(w, http.StatusBadRequest, fmt.Errorf("bridge: reading the body: %w", err))
		return
	}
	if fp.sum() != rec.Body {
		b.ctr.idemMismatch.Add(1)
		b.fail(w, http.StatusUnprocessableEntity, fmt.Errorf("%w: the key was used with a different body in the last %v", ErrIdempotencyKey, b.cfg.IdempotencyWindow))
		return
	}
	b.ctr.idemReplays.Add(1)
	w.Header().Set(HeaderIdempotentReplay, "true")
	writeJSON(w, rec.Status, rec.Response)
}

// keyedRequest is a request with an Idempotency-Key being run.
type keyedRequest struct {
	id string       // idemID of its tenant, thread and key
	fp *fingerprint // of what its body yielded
}

// beginKeyed claims id for this request (409 if it is in flight), answers
// a retry from the key's record (a replay or 422), and otherwise sets
// opts.MsgID. It returns in wrapped to fingerprint the body; done means
// the request has been answered (and id is not claimed).
func (b *Bridge) beginKeyed(w http.ResponseWriter, r *http.Request, id string, in io.Reader, opts *agent.StreamOptions) (*keyedRequest, io.Reader, bool) {
	if !b.claim(id) {
		b.ctr.idemConflicts.Add(1)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusConflict, Response{Error: ErrIdempotencyKey.Error() + ": a request with this key is in flight"})
		return nil, in, true
	}
	rec, err := b.loadRecord(r.Context(), id)
	if err != nil {
		b.unclaim(id)
		w.Header().Set("Retry-After", "1")
		b.fail(w, http.StatusServiceUnavailable, err)
		return nil, in, true
	}
	fp := newFingerprint(in)
	if rec != nil {
		b.replayOrRefuse(w, fp, http.MaxBytesReader(w, io.NopCloser(fp), b.cfg.MaxBodyBytes), rec)
		b.unclaim(id)
		return nil, in, true
	}
	opts.MsgID = func(i int) string { return idemMsgID(id, i) }
	return &keyedRequest{id: id, fp: fp}, fp, false
}

// finishKeyed records a keyed request's final answer for its retries. The
// rest of the body counts in its fingerprint (a framing error stops the
// reading early); MaxBodyBytes still bounds it. A record that cannot be
// written is said in the answer: a retry then runs again, and the message
// ids still store nothing twice.
func (b *Bridge) finishKeyed(ctx context.Context, kr *keyedRequest, body io.Reader, status int, resp *Response) {
	var maxErr *http.MaxBytesError
	if _, err := io.Copy(io.Discard, body); err != nil && !errors.As(err, &maxErr) {
		return // the body broke off: no final answer
	}
	if err := b.storeRecord(ctx, kr.id, idemRecord{Body: kr.fp.sum(), Status: status, Response: *resp}); err != nil {
		resp.Error = strings.TrimPrefix(resp.Error+"; ", "; ") + "bridge: the answer was not recorded for a retry: " + err.Error()
	}
}
