package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/export"
	"github.com/threadcast/threadcast/wire"
)

func init() {
	register(command{
		name:    "export",
		summary: "write a tenant's runs, messages and tool calls from the event log as Parquet or NDJSON",
		run:     runExport,
	})
}

func runExport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	natsURL := fs.String("nats-url", nats.DefaultURL, "NATS server of the running Threadcast (JetStream, with the event stream)")
	creds := fs.String("nats-creds", "", "NATS credentials `file` (JWT, operator mode) of a service identity that may read the stream")
	nkey := fs.String("nats-nkey", "", "nkey seed `file` (SU...) of a service identity that may read the stream (a locked server's service user)")
	stream := fs.String("stream", wire.DefaultStream, "the event stream")
	tenant := fs.String("tenant", "", "tenant to export ([a-z0-9][a-z0-9_-]*, at most 63); required")
	format := fs.String("format", "parquet", "output format: parquet or ndjson")
	out := fs.String("out", "", "output `DIR` (created if missing); required")
	since := fs.String("since", "", "window start: a stream sequence (inclusive) or an RFC 3339 time (inclusive, the time the event was stored); empty: the stream's start")
	until := fs.String("until", "", "window end: a stream sequence (inclusive) or an RFC 3339 time (exclusive); empty: the stream's last event when the export started")
	partRows := fs.Int("part-rows", export.DefaultPartRows, "start a new part after the thread that takes a part to this many rows (three tables together)")
	timeout := fs.Duration("timeout", 0, "give up after this long (the export resumes when run again); 0: no limit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: threadcast export --tenant T --out DIR [--format parquet|ndjson] [--since S] [--until U] [flags]

Reads tenant T's events from the event log (the JetStream stream ingest
reads), folds each thread as ingest does, and writes three tables into DIR,
in parts: runs-NNNNNN.EXT (one row per run that ended in the window: the run
summary), messages-NNNNNN.EXT and tool_calls-NNNNNN.EXT (the messages and
tool calls whose last change is in the window, as they stand at its end),
plus manifest.json. docs/export.md describes every column.

An export is resumable and exactly once: its window's end is fixed (as a
stream sequence) when it starts, each part is complete before the manifest
names it, and running the same command again after an interruption
(kill -9 included) continues where the manifest stops, with the same rows
an uninterrupted export writes. Running it on a complete export does
nothing. A DIR holding another export (tenant, stream, format or window) is
refused.

The connection needs a service identity that may read the stream
(--nats-creds or --nats-nkey on a locked server): agent tokens cannot.

Exit status: 0 the export is complete; 1 it failed while reading or
writing (run it again to resume); 2 bad flags, an unusable DIR or manifest,
no NATS connection or no stream.

flags:
`)
		fs.PrintDefaults()
	}
	if err := envflag.ParseArgs(fs, args); err != nil {
		return envflag.Report("threadcast export", err, stdout, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "threadcast export: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "threadcast export: %v\n", err)
		return exitUsage
	}
	cfg := export.Config{Tenant: *tenant, Stream: *stream, Out: *out, PartRows: *partRows}
	if *tenant == "" || *out == "" {
		fmt.Fprintln(stderr, "threadcast export: --tenant and --out are required")
		fs.Usage()
		return exitUsage
	}
	var err error
	if cfg.Format, err = export.ParseFormat(*format); err != nil {
		return fail(err)
	}
	if cfg.Since, err = export.ParseBound(*since); err != nil {
		return fail(fmt.Errorf("--since: %w", err))
	}
	if cfg.Until, err = export.ParseBound(*until); err != nil {
		return fail(fmt.Errorf("--until: %w", err))
	}
	if *creds != "" && *nkey != "" {
		return fail(fmt.Errorf("--nats-creds and --nats-nkey are two identities: give one"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	opts := []nats.Option{nats.Name("threadcast export"), nats.Timeout(5 * time.Second)}
	switch {
	case *nkey != "":
		opt, err := nats.NkeyOptionFromSeed(*nkey)
		if err != nil {
			return fail(fmt.Errorf("--nats-nkey: %w", err))
		}
		opts = append(opts, opt)
	case *creds != "":
		opts = append(opts, nats.UserCredentials(*creds))
	}
	nc, err := nats.Connect(*natsURL, opts...)
	if err != nil {
		return fail(fmt.Errorf("connect to %s: %w", *natsURL, err))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	res, err := export.Run(ctx, js, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "threadcast export: %v\n", err)
		if isUsageError(err) {
			return exitUsage
		}
		return exitRejected
	}
	m := res.Manifest
	var runs, msgs, calls int64
	for _, p := range m.Parts {
		runs, msgs, calls = runs+p.Runs, msgs+p.Messages, calls+p.ToolCalls
	}
	verb := "exported"
	if res.Resumed {
		verb = "resumed and completed"
	}
	fmt.Fprintf(stdout, "%s %s: seqs %d..%d, %d parts, %d runs, %d messages, %d tool calls in %s\n",
		verb, m.Tenant, m.From, m.To, len(m.Parts), runs, msgs, calls, *out)
	return exitOK
}

// isUsageError reports whether err is about the command's input, not a
// failure along the way (export.ErrWrite, reading the stream).
func isUsageError(err error) bool {
	if errors.Is(err, export.ErrWrite) {
		return false
	}
	for _, e := range []error{export.ErrBadTenant, export.ErrBadFormat, export.ErrBadBound, export.ErrBadWindow,
		export.ErrOut, export.ErrBadManifest, export.ErrManifestMismatch, export.ErrNoStream} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
