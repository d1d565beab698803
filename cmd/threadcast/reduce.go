package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
)

func init() {
	register(command{
		name:    "reduce",
		summary: "print the view an AG-UI event stream produces",
		run:     runReduce,
	})
}

func runReduce(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reduce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf streamFlags
	sf.register(fs)
	until := fs.String("until", "", "fold the stream's events up to seq `N` only (its Nth event: the seq of the view printed), to see the view as it was then; N past the stream's last event is an error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: threadcast reduce [--input FILE] [--until N] [STREAM]

Reads an AG-UI event stream (JSONL, a JSON array, or SSE; from STREAM, or
stdin when STREAM is absent or "-"; consumed as AG-UI 1.1, which is 1.0 plus
encryptedValueType, unless --protocol 1.0), applies it to an empty thread
view, and prints the final view as one JSON object on stdout. Its "messages"
and "state" keys hold the AG-UI shapes; the other keys describe runs, steps,
subagents and counts.

Warnings go to stderr, one per line, each starting with "warning: ". A fatal
protocol error, or an event that is malformed, ends the run it belongs to, as
it does in ingest: the reason goes to stderr as a line starting with
"error: ", everything before it stays applied, and the events after it are
still folded (only RUN_STARTED, which begins a new run, is accepted; each
refused event is an "error: " line), so the view printed is the live view of
the same events.

With --until N only the first N events are folded (each event of the
stream is one seq, counted from 1, as the view's "seq" counts them): the
view printed is the view as it was after event N. N must be an integer
from 1 to the stream's number of events.

Exit status: 0 ok; 1 the stream was rejected (a fatal protocol error, or a
stream that breaks off or turns into bytes that are no event after some
events: those stay applied); 2 unusable input (an unreadable stream or
input file, a stream with no event at all, bad flags).

flags:
`)
		fs.PrintDefaults()
	}
	r, status, ok := parseFlags(fs, args, stdin, stdout, stderr)
	if !ok {
		return status
	}
	defer r.Close()

	f, ok := sf.folder("reduce", stderr)
	if !ok {
		return exitUsage
	}
	if *until != "" {
		n, err := strconv.ParseUint(*until, 10, 64)
		if err != nil || n == 0 {
			fmt.Fprintf(stderr, "threadcast reduce: --until %q: not an event seq (an integer from 1)\n", *until)
			return exitUsage
		}
		f.until = n
	}
	status = f.each(r, nil)
	if status == exitUsage {
		return status
	}
	if f.until > 0 && f.seq < f.until {
		fmt.Fprintf(stderr, "threadcast reduce: --until %d is beyond the stream's last event, seq %d\n", f.until, f.seq)
		return exitUsage
	}
	out := f.th.AppendView(nil)
	out = append(out, '\n')
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "threadcast reduce: %v\n", err)
		return exitUsage
	}
	return status
}
