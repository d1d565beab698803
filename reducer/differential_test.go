//go:build oracle

package reducer

// The differential test: seeded random valid streams (tools/streamgen:
// interleaved text, tool calls and results, reasoning, activities, state
// snapshots and every kind of RFC 6902 delta, steps, nested and parallel
// subagents, chunk lanes, MESSAGES_SNAPSHOT, metadata with nulls) go through
// our codec and reducer and through the TypeScript reference consumer
// (@ag-ui/client 1.0.0, via tools/oracle/apply.mjs); the messages
// and the state must be equal as JSON values (jsondoc.Equal: key order
// ignored, numbers compared by value).
//
// Where the reference consumer and the spec disagree (the corpus cases
// marked specDivergence, and "Where the oracle is not the spec" in the
// oracle's README) the spec wins. No normalisation is needed here because
// the generator never emits those shapes: it keeps to streams the reference
// accepts with no error and no warning, away from every known divergence
// (that is its contract, see its README). The test checks that premise too —
// a stream the reference warns about or rejects fails the test instead of
// being compared.
//
// Run it with the oracle installed (see oracleDir):
//
//	go test -tags oracle -run Differential -count=1 ./reducer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/jsondoc"
)

// differentialStreams are the generator settings, each with its own seed.
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

func TestDifferentialReducerVsReference(t *testing.T) {
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

			var events []*codec.Event
			for _, line := range bytes.Split(bytes.TrimSpace(stream), []byte("\n")) {
				events = append(events, codecEvent(t, string(line)))
			}
			th := NewThread("diff")
			for i, ev := range events {
				res := th.Apply(uint64(i)+1, ev)
				if res.Fatal != nil {
					t.Fatalf("event %d (%s): fatal %v; the reference accepts it", i, ev.Type, res.Fatal)
				}
				for _, w := range res.Warnings {
					t.Errorf("event %d (%s): warning %s; the reference has none", i, ev.Type, w.Message)
				}
			}
			compareWithReference(t, "reducer", want, th)

			t.Logf("%d events, %d messages", len(events), len(want.Messages))
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// compareWithReference compares our thread's messages and state with the
// reference's.
func compareWithReference(t *testing.T, what string, want testsupport.OracleResult, th *Thread) {
	t.Helper()
	var msgs []json.RawMessage
	if err := json.Unmarshal(th.AppendMessages(nil), &msgs); err != nil {
		t.Fatalf("%s: our messages are not a JSON array: %v", what, err)
	}
	compareResults(t, what, want, msgs, th.AppendState(nil))
}

// compareResults compares messages one by one (so a failure names the
// first message that differs) and then the state.
func compareResults[M ~[]byte](t *testing.T, what string, want testsupport.OracleResult, msgs []M, state []byte) {
	t.Helper()
	if len(msgs) != len(want.Messages) {
		t.Errorf("%s: %d messages, the reference has %d", what, len(msgs), len(want.Messages))
	}
	for i := 0; i < len(msgs) && i < len(want.Messages); i++ {
		eq, err := jsondoc.Equal(msgs[i], want.Messages[i])
		if err != nil || !eq {
			t.Errorf("%s: message %d differs (err %v)\n got %.600s\nwant %.600s", what, i, err, msgs[i], want.Messages[i])
			break
		}
	}
	if eq, err := jsondoc.Equal(state, want.State); err != nil || !eq {
		t.Errorf("%s: state differs (err %v)\n got %.600s\nwant %.600s", what, err, state, want.State)
	}
}
