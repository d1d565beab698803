package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// TestReduceUntil checks `reduce --until N` on every case of the corpus
// against an independent cut: the same command without --until on a
// stream of the case's first N events only. Both views must be equal, at
// the first event, in the middle and at the last.
func TestReduceUntil(t *testing.T) {
	checked := 0
	for _, c := range loadCases(t, "cases") {
		if c.input != "" {
			continue
		}
		var raws [][]byte
		sr := codec.NewStreamReader(bytes.NewReader(c.stream))
		for {
			raw, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				raws = nil // a stream that breaks off: its cut is not a prefix of lines
				break
			}
			raws = append(raws, append([]byte(nil), raw...))
		}
		if len(raws) < 2 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []int{1, len(raws) / 2, len(raws)} {
				got := runCLI(t, c.stream, "reduce", "--until", strconv.Itoa(n))
				want := runCLI(t, bytes.Join(raws[:n], []byte("\n")), "reduce")
				if got.stdout != want.stdout || got.code != want.code {
					t.Fatalf("--until %d: exit %d\n%s\nwant exit %d\n%s", n, got.code, got.stdout, want.code, want.stdout)
				}
				var v struct {
					Seq uint64 `json:"seq"`
				}
				if err := json.Unmarshal([]byte(got.stdout), &v); err != nil || v.Seq > uint64(n) {
					t.Fatalf("--until %d: view seq %d (%v)", n, v.Seq, err)
				}
			}
		})
		checked++
	}
	if checked == 0 {
		t.Fatal("no case checked")
	}
}

// TestReduceUntilErrors: a malformed --until, and one past the stream's
// last event, are usage errors with a clear message.
func TestReduceUntilErrors(t *testing.T) {
	stream := []byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n" + `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}` + "\n")
	for _, tt := range []struct{ until, want string }{
		{"x", `--until "x": not an event seq`},
		{"0", `--until "0": not an event seq`},
		{"-1", `--until "-1": not an event seq`},
		{"3", "--until 3 is beyond the stream's last event, seq 2"},
	} {
		r := runCLI(t, stream, "reduce", "--until", tt.until)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
			t.Errorf("--until %s: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.until, r.code, r.stdout, r.stderr, exitUsage, tt.want)
		}
	}
	if r := runCLI(t, stream, "reduce", "--until", "2"); r.code != exitOK {
		t.Errorf("--until 2 of 2 events: exit %d %s", r.code, r.stderr)
	}
}
