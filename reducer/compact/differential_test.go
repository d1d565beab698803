//go:build oracle

package compact

// The differential test of the compaction invariant: seeded random valid
// streams (tools/streamgen) are compacted, and the TypeScript reference
// consumer (@ag-ui/client 1.0.0, via tools/oracle/apply.mjs) must give the
// compacted stream the messages and state it gives the original, as JSON
// values (jsondoc.Equal), with no error and no warning. It is a check of
// Events by a consumer that is not ours.
//
//	go test -tags oracle -run Differential -count=1 ./reducer/compact

import (
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/jsondoc"
)

// differentialStreams are the generator settings, each with its own seed:
// those of the reducer's differential test.
var differentialStreams = []struct {
	seed string
	args []string
}{
	{"diff-1", []string{"--events", "3000"}},
	{"diff-2", []string{"--events", "3000"}},
	{"diff-3", []string{"--events", "3000", "--verbosity", "6"}},
	{"diff-4", []string{"--events", "3000", "--no-chunks"}},
	{"diff-5", []string{"--events", "3000", "--run-length", "20,80"}},
	{"diff-6", []string{"--events", "3000", "--no-subagents", "--no-messages-snapshots"}},
	{"diff-7", []string{"--events", "2000", "--no-run-errors", "--verbosity", "2"}},
	{"diff-8", []string{"--events", "6000", "--run-length", "500,1500"}},
}

func TestDifferentialCompactedVsReference(t *testing.T) {
	dir := testsupport.OracleDir(t)
	gen := testsupport.Streamgen(t)
	for _, s := range differentialStreams {
		t.Run(s.seed, func(t *testing.T) {
			stream := testsupport.Generate(t, gen, append([]string{"--seed", s.seed}, s.args...)...)
			want := testsupport.RunOracle(t, dir, stream)
			if want.Error != nil || len(want.Warnings) != 0 {
				t.Fatalf("generator premise broken: the reference consumer reports error %v and %d warnings",
					deref(want.Error), len(want.Warnings))
			}
			events := decodeEvents(t, jsonlLines(stream))
			if n := len(jsonlLines(stream)); len(events) != n {
				t.Fatalf("our codec accepted %d of %d events", len(events), n)
			}
			compacted := Events(events)
			var jl []byte
			for _, ev := range compacted {
				jl = codec.AppendEvent(jl, ev)
				jl = append(jl, '\n')
			}
			got := testsupport.RunOracle(t, dir, jl)
			if got.Error != nil || len(got.Warnings) != 0 {
				t.Fatalf("reference consumer on the compacted stream (%d of %d events): error %v, %d warnings %s",
					len(compacted), len(events), deref(got.Error), len(got.Warnings), got.Warnings)
			}
			if len(got.Messages) != len(want.Messages) {
				t.Errorf("%d messages, the reference has %d on the original", len(got.Messages), len(want.Messages))
			}
			for i := 0; i < len(got.Messages) && i < len(want.Messages); i++ {
				if eq, err := jsondoc.Equal(got.Messages[i], want.Messages[i]); err != nil || !eq {
					t.Errorf("message %d differs (err %v)\n got %.600s\nwant %.600s", i, err, got.Messages[i], want.Messages[i])
					break
				}
			}
			if eq, err := jsondoc.Equal(got.State, want.State); err != nil || !eq {
				t.Errorf("state differs (err %v)\n got %.600s\nwant %.600s", err, got.State, want.State)
			}
			t.Logf("%d events, %d compacted, %d messages", len(events), len(compacted), len(want.Messages))
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
