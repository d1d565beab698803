package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/wire"
)

// Errors. Each is wrapped with the detail. All but ErrWrite are about the
// input (the Config, the output directory, the manifest, the stream) and
// stay until it changes; ErrWrite is a failure while writing parts or the
// manifest, after which running the export again resumes it.
var (
	ErrBadTenant        = errors.New("export: invalid tenant")
	ErrBadFormat        = errors.New("export: unknown format")
	ErrBadBound         = errors.New("export: invalid window bound")
	ErrBadWindow        = errors.New("export: empty window")
	ErrOut              = errors.New("export: output directory")
	ErrWrite            = errors.New("export: write")
	ErrBadManifest      = errors.New("export: unreadable manifest")
	ErrManifestMismatch = errors.New("export: the output directory holds another export")
	ErrNoStream         = errors.New("export: event stream not found")
)

// Format is an output format.
type Format string

// The formats.
const (
	FormatParquet Format = "parquet"
	FormatNDJSON  Format = "ndjson"
)

func (f Format) ext() string { return string(f) }

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case FormatParquet, FormatNDJSON:
		return Format(s), nil
	}
	return "", fmt.Errorf("%w %q (parquet or ndjson)", ErrBadFormat, s)
}

// Bound is one end of the window: a stream sequence or a time (the time
// JetStream stored the event). The zero Bound is open.
type Bound struct {
	Seq  uint64
	Time time.Time
}

// ParseBound reads a bound: "" (open), a stream sequence (digits, at least
// 1) or an RFC 3339 time.
func ParseBound(s string) (Bound, error) {
	if s == "" {
		return Bound{}, nil
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return Bound{}, fmt.Errorf("%w %q: a sequence is an integer from 1", ErrBadBound, s)
		}
		return Bound{Seq: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Bound{}, fmt.Errorf("%w %q: neither a stream sequence nor an RFC 3339 time", ErrBadBound, s)
	}
	return Bound{Time: t}, nil
}

// IsZero reports whether b is open.
func (b Bound) IsZero() bool { return b.Seq == 0 && b.Time.IsZero() }

// String is the bound as ParseBound reads it ("" when open).
func (b Bound) String() string {
	switch {
	case b.Seq != 0:
		return strconv.FormatUint(b.Seq, 10)
	case !b.Time.IsZero():
		return b.Time.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// DefaultPartRows is Config.PartRows's default.
const DefaultPartRows = 100_000

// Config is what to export and where.
type Config struct {
	Tenant string
	// Stream is the event stream; "": wire.DefaultStream.
	Stream string
	Format Format
	// Out is the output directory, created if missing.
	Out string
	// Since and Until bound the window: since ≤ x ≤ until for sequences,
	// since ≤ t < until for times (docs/export.md says which rows a
	// window holds).
	Since, Until Bound
	// PartRows ends a part after the thread that takes its rows (all three
	// tables together) to at least this many; 0: DefaultPartRows.
	PartRows int
	// FetchWait bounds the wait for a thread's next message (the thread's
	// messages are all stored: a wait this long means there are no more);
	// 0: 2 s.
	FetchWait time.Duration

	// afterThread, when set, is called after each thread is written
	// (tests: to slow an export down).
	afterThread func()
}

// Result is what an export did.
type Result struct {
	Manifest *Manifest
	// Resumed: the directory held an unfinished export of the same
	// window, which this run continued.
	Resumed bool
	// Threads is the number of threads this run folded.
	Threads int
}

// Run exports cfg.Tenant's runs, messages and tool calls from the event
// stream into cfg.Out, or continues the export the directory's manifest
// records. It returns when every thread is in a part (the manifest then
// says complete), or with the first error; an export stopped by an error,
// by ctx or by a crash is continued by running it again with the same
// Config. js must be a connection that may read the stream (a service
// identity, not an agent's).
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) (Result, error) {
	if err := cfg.fill(); err != nil {
		return Result{}, err
	}
	if err := prepareDir(cfg.Out); err != nil {
		return Result{}, err
	}
	m, found, err := readManifest(cfg.Out)
	if err != nil {
		return Result{}, err
	}
	if found {
		if err := m.check(&cfg); err != nil {
			return Result{}, err
		}
	}
	res := Result{Manifest: m, Resumed: found}
	if found && m.Complete {
		return res, nil
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return res, fmt.Errorf("%w: %s", ErrNoStream, cfg.Stream)
	}
	if err != nil {
		return res, fmt.Errorf("export: stream %s: %w", cfg.Stream, err)
	}
	if !found {
		from, to, err := resolveWindow(ctx, js, stream, &cfg)
		if err != nil {
			return res, err
		}
		m = &Manifest{Version: manifestVersion, Tenant: cfg.Tenant, Stream: cfg.Stream, Format: cfg.Format,
			Since: cfg.Since.String(), Until: cfg.Until.String(), From: from, To: to, Parts: []Part{}}
		if err := writeManifest(cfg.Out, m); err != nil {
			return res, err
		}
		res.Manifest = m
	}
	if err := removeTemporaries(cfg.Out); err != nil {
		return res, err
	}
	threads, err := listThreads(ctx, stream, cfg.Tenant)
	if err != nil {
		return res, err
	}
	if n := len(m.Parts); n > 0 {
		last := m.Parts[n-1].LastThread
		i, found := slices.BinarySearch(threads, last)
		if found {
			i++
		}
		threads = threads[i:]
	}
	e := exporter{cfg: &cfg, js: js, m: m}
	err = e.run(ctx, threads)
	res.Threads = e.threads
	return res, err
}

func (c *Config) fill() error {
	if err := wire.ValidTenant(c.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrBadTenant, err)
	}
	if _, err := ParseFormat(string(c.Format)); err != nil {
		return err
	}
	if c.Out == "" {
		return fmt.Errorf("%w: none given", ErrOut)
	}
	if c.Stream == "" {
		c.Stream = wire.DefaultStream
	}
	if c.PartRows <= 0 {
		c.PartRows = DefaultPartRows
	}
	if c.FetchWait <= 0 {
		c.FetchWait = 2 * time.Second
	}
	s, u := c.Since, c.Until
	switch {
	case s.Seq != 0 && u.Seq != 0 && s.Seq > u.Seq,
		!s.Time.IsZero() && !u.Time.IsZero() && !s.Time.Before(u.Time):
		return fmt.Errorf("%w: since %s is not before until %s", ErrBadWindow, s, u)
	}
	return nil
}

// prepareDir creates dir if needed and proves it writable.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrOut, err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*"+tmpSuffix)
	if err != nil {
		return fmt.Errorf("%w: %s is not writable: %w", ErrOut, dir, err)
	}
	name := probe.Name()
	_ = probe.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%w: %w", ErrOut, err)
	}
	return nil
}

// removeTemporaries deletes the files an interrupted run was writing.
func removeTemporaries(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*"+tmpSuffix))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOut, err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			return fmt.Errorf("%w: %w", ErrOut, err)
		}
	}
	return nil
}

// tenantFilter is the subject filter of a tenant's stored events.
func tenantFilter(tenant string) string { return wire.StoredPrefix + ".*." + tenant + ".*" }

// threadFilter is the subject filter of one thread's stored events, in any
// partition.
func threadFilter(tenant, token string) string {
	return wire.StoredPrefix + ".*." + tenant + "." + token
}

// resolveWindow turns the window's bounds into stream sequences.
func resolveWindow(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg *Config) (from, to uint64, err error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("export: stream %s: %w", cfg.Stream, err)
	}
	last := info.State.LastSeq
	from, to = 1, last
	switch {
	case cfg.Since.Seq != 0:
		from = cfg.Since.Seq
	case !cfg.Since.Time.IsZero():
		if from, err = firstAt(ctx, js, cfg, cfg.Since.Time, last); err != nil {
			return 0, 0, err
		}
	}
	switch {
	case cfg.Until.Seq != 0:
		to = min(cfg.Until.Seq, last)
	case !cfg.Until.Time.IsZero():
		first, err := firstAt(ctx, js, cfg, cfg.Until.Time, last)
		if err != nil {
			return 0, 0, err
		}
		to = min(first-1, last)
	}
	return from, to, nil
}

// firstAt returns the sequence of the tenant's first event stored at or
// after t, or last+1 when none is (up to last).
func firstAt(ctx context.Context, js jetstream.JetStream, cfg *Config, t time.Time, last uint64) (uint64, error) {
	cons, err := js.OrderedConsumer(ctx, cfg.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{tenantFilter(cfg.Tenant)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &t,
	})
	if err != nil {
		return 0, fmt.Errorf("export: find the first event at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	defer deleteConsumer(js, cfg.Stream, cons)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(cfg.FetchWait))
	if err != nil {
		return 0, fmt.Errorf("export: find the first event at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	for msg := range batch.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			return 0, err
		}
		return min(md.Sequence.Stream, last+1), nil
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return 0, err
	}
	return last + 1, nil
}

// deleteConsumer removes an ordered consumer as soon as it is done with
// (the server would, after its inactivity threshold).
func deleteConsumer(js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if info := cons.CachedInfo(); info != nil {
		_ = js.DeleteConsumer(ctx, stream, info.Name)
	}
}

// listThreads returns the tokens of the tenant's threads that have events
// in the stream, in byte order.
func listThreads(ctx context.Context, stream jetstream.Stream, tenant string) ([]string, error) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(tenantFilter(tenant)))
	if err != nil {
		return nil, fmt.Errorf("export: list the threads of %s: %w", tenant, err)
	}
	seen := map[string]struct{}{}
	for subj := range info.State.Subjects {
		_, ten, tok, err := wire.ParseStoredSubject(subj)
		if err != nil || ten != tenant {
			continue // not a thread's subject: nothing ingest would read either
		}
		seen[tok] = struct{}{}
	}
	threads := make([]string, 0, len(seen))
	for tok := range seen {
		threads = append(threads, tok)
	}
	slices.Sort(threads)
	return threads, nil
}

// exporter writes the parts of one run.
type exporter struct {
	cfg     *Config
	js      jetstream.JetStream
	m       *Manifest
	part    *partWriter
	pt      Part // the open part's record
	threads int
}

func (e *exporter) run(ctx context.Context, threads []string) error {
	defer func() {
		if e.part != nil {
			e.part.abort()
		}
	}()
	win := window{e.m.From, e.m.To}
	for _, tok := range threads {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, err := wire.DecodeThread(tok)
		if err != nil {
			continue // listThreads parsed it
		}
		f := newThreadFold(e.cfg.Tenant, id, win)
		if win.from <= win.to {
			if err := e.fold(ctx, f, tok); err != nil {
				return err
			}
		}
		msgs, calls, err := f.rows()
		if err != nil {
			return fmt.Errorf("export: thread %q: %w", id, err)
		}
		if e.part == nil {
			if e.part, err = newPart(e.cfg.Out, len(e.m.Parts), e.cfg.Format); err != nil {
				return err
			}
			e.pt = Part{N: len(e.m.Parts)}
		}
		if err := e.part.add(f.runs, msgs, calls); err != nil {
			return err
		}
		e.pt.LastThread = tok
		e.pt.Threads++
		e.threads++
		if e.part.total() >= int64(e.cfg.PartRows) {
			if err := e.commit(false); err != nil {
				return err
			}
		}
		if e.cfg.afterThread != nil {
			e.cfg.afterThread()
		}
	}
	switch {
	case e.part == nil && len(e.m.Parts) == 0:
		// No thread at all: one empty part, so that every table has a
		// file to read.
		part, err := newPart(e.cfg.Out, 0, e.cfg.Format)
		if err != nil {
			return err
		}
		e.part, e.pt = part, Part{}
	case e.part != nil && e.part.total() == 0 && len(e.m.Parts) > 0:
		// Threads with no rows in the window after the last part: the
		// manifest's completeness covers them.
		e.part.abort()
		e.part = nil
	}
	if e.part != nil {
		return e.commit(true)
	}
	e.m.Complete = true
	return writeManifest(e.cfg.Out, e.m)
}

// commit completes the open part and records it.
func (e *exporter) commit(complete bool) error {
	if err := e.part.commit(); err != nil {
		return err
	}
	e.pt.Runs, e.pt.Messages, e.pt.ToolCalls = e.part.rows[0], e.part.rows[1], e.part.rows[2]
	e.pt.Files = e.part.names[:]
	e.part = nil
	e.m.Parts = append(e.m.Parts, e.pt)
	e.m.Complete = complete
	return writeManifest(e.cfg.Out, e.m)
}

// fold reads one thread's stored messages up to the window's end, in order.
func (e *exporter) fold(ctx context.Context, f *threadFold, tok string) error {
	cons, err := e.js.OrderedConsumer(ctx, e.cfg.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{threadFilter(e.cfg.Tenant, tok)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("export: read thread %s: %w", tok, err)
	}
	defer deleteConsumer(e.js, e.cfg.Stream, cons)
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(e.cfg.FetchWait))
		if err != nil {
			return fmt.Errorf("export: read thread %s: %w", tok, err)
		}
		n, done := 0, false
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("export: read thread %s: %w", tok, err)
			}
			if md.Sequence.Stream > f.win.to {
				done = true
				break
			}
			f.apply(md.Sequence.Stream, md.Timestamp, msg.Data())
			if md.NumPending == 0 {
				done = true // the thread's last stored message: no wait for more
				break
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !done {
			return fmt.Errorf("export: read thread %s: %w", tok, err)
		}
		if done || n == 0 {
			return nil
		}
	}
}
