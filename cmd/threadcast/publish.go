package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/agent"
)

func init() {
	register(command{
		name:    "publish",
		summary: "publish a recorded AG-UI stream of one thread into a running Threadcast",
		run:     runPublish,
	})
}

func runPublish(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	natsURL := fs.String("nats-url", nats.DefaultURL, "NATS server to publish to (JetStream, with the Threadcast event stream)")
	tenant := fs.String("tenant", "", "tenant name ([a-z0-9][a-z0-9_-]*, at most 63); required")
	thread := fs.String("thread", "", "thread id (any string, at most 1024 bytes); required")
	token := fs.String("token", "", "token of the tenant with the publish scope (threadcast token --scope publish, or a printed dev token): required by a Threadcast NATS server, which admits no anonymous agent")
	linger := fs.Duration("linger", 2*time.Millisecond, "how long an event waits for companions to share a message; 0 = one event per message")
	timeout := fs.Duration("timeout", time.Minute, "give up (and report what is unacknowledged) after this long")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: threadcast publish --tenant T --thread X [--token TOKEN] [flags] [STREAM]

Reads an AG-UI 1.0 event stream (JSONL, a JSON array, or SSE; from STREAM, or
stdin when STREAM is absent or "-") and publishes its events, in order, as the
events of thread X of tenant T, through the same publisher SDK agents use:
each event is validated first, and an invalid one is reported and skipped
while the others are published. Waits until every published event is
acknowledged by JetStream.

With --token the connection is authorized as an agent of tenant T: the
token must be T's and grant the publish scope; a server that refuses it
(forged, expired, read only) ends the command with status 2 and an
authorization violation; another tenant's token connects, but each publish
is a permissions violation, reported, and the events fail (status 1).

Each skipped or failed event is reported on stderr as a line "rejected: event
N: REASON" or "failed: event N: REASON" (N counts from 0); a summary line
follows. Re-running the command publishes the events again (as new events).

Exit status: 0 every event stored; 1 some events were invalid or could not be
stored (the others were); 2 unusable input (unreadable or badly framed
stream), bad flags, or no NATS connection.

flags:
`)
		fs.PrintDefaults()
	}
	// parseFlags (stream.go) opens STREAM or stdin.
	r, status, ok := parseFlags(fs, args, stdin, stdout, stderr)
	if !ok {
		return status
	}
	defer r.Close()
	if *tenant == "" || *thread == "" {
		fmt.Fprintln(stderr, "threadcast publish: --tenant and --thread are required")
		fs.Usage()
		return exitUsage
	}
	if _, err := agent.Subject(*tenant, *thread); err != nil {
		fmt.Fprintf(stderr, "threadcast publish: %v\n", err)
		return exitUsage
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// The server's asynchronous errors (a permissions violation: a token of
	// another tenant, or without access to the thread) are reported, not
	// left to surface as ack timeouts; they arrive on nats.go's goroutine.
	var errMu sync.Mutex
	opts := []nats.Option{nats.Name("threadcast publish"), nats.Timeout(5 * time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			errMu.Lock()
			defer errMu.Unlock()
			fmt.Fprintf(stderr, "threadcast publish: %v\n", err)
		})}
	if *token != "" {
		tok := *token
		tokOpts, err := agent.TokenAuth(*tenant, func() string { return tok })
		if err != nil {
			fmt.Fprintf(stderr, "threadcast publish: %v\n", err)
			return exitUsage
		}
		opts = append(opts, tokOpts...)
	}
	nc, err := nats.Connect(*natsURL, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "threadcast publish: connect to %s: %v\n", *natsURL, err)
		return exitUsage
	}
	defer nc.Close()
	cfg := agent.DefaultConfig()
	cfg.Linger = *linger
	pub, err := agent.New(nc, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "threadcast publish: %v\n", err)
		return exitUsage
	}
	report := func(format string, a ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		fmt.Fprintf(stderr, format, a...)
	}
	res, streamErr := agent.PublishStream(ctx, pub, *tenant, *thread, r, agent.StreamOptions{MaxErrors: 1 << 20})
	if err := pub.Close(ctx); err != nil && streamErr == nil {
		streamErr = fmt.Errorf("waiting for acks: %w", err)
	}

	for _, e := range res.Rejected {
		report("rejected: event %d: %v\n", e.Index, e.Err)
	}
	for _, e := range res.Failed {
		report("failed: event %d: %v\n", e.Index, e.Err)
	}
	fmt.Fprintf(stdout, "published %d of %d events to %s/%s (%d rejected, %d failed)\n",
		res.Accepted, res.Events, *tenant, *thread, res.RejectedCount, res.FailedCount)
	switch {
	case streamErr != nil:
		report("threadcast publish: %v\n", streamErr)
		if errors.Is(streamErr, context.DeadlineExceeded) {
			return exitRejected
		}
		return exitUsage
	case res.RejectedCount > 0 || res.FailedCount > 0:
		return exitRejected
	}
	return exitOK
}
