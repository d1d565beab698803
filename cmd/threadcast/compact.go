package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer/compact"
)

func init() {
	register(command{
		name:    "compact",
		summary: "print an AG-UI event stream compacted, as JSONL",
		run:     runCompact,
	})
}

func runCompact(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf streamFlags
	sf.register(fs)
	stats := fs.Bool("stats", false, "report the number of events and bytes in and out on stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: threadcast compact [--input FILE] [--stats] [STREAM]

Reads an AG-UI 1.0 event stream (JSONL, a JSON array, or SSE; from STREAM, or
stdin when STREAM is absent or "-") and prints it compacted, one event per
line: content deltas of an item joined, chunk streams collapsed into one
chunk, state and activity patches folded into the snapshot or patch before
them. Reducing the output gives the same view as reducing the input (from
the same --input), warnings and protocol errors included: events that were
not applied cleanly are kept as they were, and nothing moves across them.

The output holds the events as the codec accepted them: properties and
events the codec stripped or dropped (with a warning) are not in it, so
reducing the output does not repeat those warnings. Whether an event was
applied cleanly is judged from --input's starting point, so reduce the
output from the same --input.

Warnings go to stderr, one per line, each starting with "warning: "; a
fatal protocol error, or an event that is malformed (not decodable), goes
to stderr as a line starting with "error: " and ends that run; the events
after it are read on, as ingest does (only RUN_STARTED, a new run, is
accepted then).

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

	f, ok := sf.folder("compact", stderr)
	if !ok {
		return exitUsage
	}
	c := compact.New()
	status = f.each(r, c.Add)
	if status == exitUsage {
		return status
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	var (
		buf      []byte
		outBytes int
	)
	out := c.Flush(nil)
	for _, ev := range out {
		buf = codec.AppendEvent(buf[:0], ev)
		buf = append(buf, '\n')
		outBytes += len(buf)
		if _, err := w.Write(buf); err != nil {
			fmt.Fprintf(stderr, "threadcast compact: %v\n", err)
			return exitUsage
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "threadcast compact: %v\n", err)
		return exitUsage
	}
	if *stats {
		fmt.Fprintf(stderr, "compact: %d events in, %d events out (%d bytes out)\n", f.seq, len(out), outBytes)
	}
	return status
}
