package demo

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/reducer"
)

// reduce runs a stream through the codec and the reducer and fails the test
// on any error or warning from either: a demo stream must be spotless.
func reduce(t *testing.T, threadID string, evs []Event) *reducer.Thread {
	t.Helper()
	var d codec.Decoder
	var e codec.Event
	th := reducer.NewThread(threadID)
	for i, ev := range evs {
		if err := d.Decode(ev.JSON, &e); err != nil {
			t.Fatalf("event %d: codec: %v\n%s", i, err, ev.JSON)
		}
		if w := d.Warnings(); len(w) > 0 {
			t.Fatalf("event %d: codec warning: %v\n%s", i, w[0], ev.JSON)
		}
		res := th.Apply(uint64(i+1), &e)
		if res.Fatal != nil {
			t.Fatalf("event %d: reducer: %v\n%s", i, res.Fatal, ev.JSON)
		}
		if len(res.Warnings) > 0 {
			t.Fatalf("event %d: reducer warning: %+v\n%s", i, res.Warnings[0], ev.JSON)
		}
	}
	return th
}

// viewDoc is the part of reducer.AppendView the checks below read.
type viewDoc struct {
	Status   string `json:"status"`
	Warnings int    `json:"warnings"`
	Error    any    `json:"error"`
	State    any    `json:"state"`
	Runs     []struct {
		RunID   string `json:"runId"`
		Status  string `json:"status"`
		Verdict string `json:"verdict"`
	} `json:"runs"`
	Subagents []struct {
		Status string `json:"status"`
	} `json:"subagents"`
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// TestScriptValid runs many generated threads of every persona through the
// codec and the reducer: no error, no warning, every run with the outcome
// the script gave it, and the reducer's state equal to the state the script
// believes it sent.
func TestScriptValid(t *testing.T) {
	compared := 0
	for seed := uint64(0); seed < 90; seed++ {
		opts := Options{Persona: Personas()[seed%3], ErrorRate: 0.2, CancelRate: 0.1}
		s := NewScript(seed, opts)
		var evs []Event
		var wantRuns []string
		for range 5 {
			run := s.NextRun()
			evs = append(evs, run...)
			var last struct {
				Type    string
				Outcome struct{ Type string }
			}
			decodeJSON(t, run[len(run)-1].JSON, &last)
			switch {
			case last.Type == RunError:
				wantRuns = append(wantRuns, "error")
			case last.Outcome.Type == "cancelled":
				wantRuns = append(wantRuns, "cancelled")
			default:
				wantRuns = append(wantRuns, "finished")
			}
		}
		th := reduce(t, s.ThreadID(), evs)
		var v viewDoc
		decodeJSON(t, th.AppendView(nil), &v)
		if v.Warnings != 0 || v.Error != nil || v.Status == "rejected" || v.Status == "running" {
			t.Fatalf("seed %d: view status %q, warnings %d, error %v", seed, v.Status, v.Warnings, v.Error)
		}
		var gotRuns []string
		for _, r := range v.Runs {
			gotRuns = append(gotRuns, r.Status)
			if r.Verdict != "ok" {
				t.Errorf("seed %d: run %s verdict %q", seed, r.RunID, r.Verdict)
			}
		}
		if !reflect.DeepEqual(gotRuns, wantRuns) {
			t.Errorf("seed %d: runs %v, want %v", seed, gotRuns, wantRuns)
		}
		if !s.resync { // the last run delivered every patch the model made
			compared++
			var want any
			decodeJSON(t, mustJSON(&s.state), &want)
			if !reflect.DeepEqual(v.State, want) {
				t.Errorf("seed %d: reducer state\n%v\nscript state\n%v", seed, v.State, want)
			}
		}
	}
	if compared < 45 {
		t.Errorf("state compared on %d threads only", compared)
	}
}

// TestScriptOracle runs generated threads through the TypeScript reference
// consumer (@ag-ui/client 1.0.0, tools/oracle, found by
// testsupport.OracleDir): no error, no warning, and the same messages and
// state as our reducer.
func TestScriptOracle(t *testing.T) {
	dir := testsupport.OracleDir(t)
	for seed := uint64(100); seed < 112; seed++ {
		s := NewScript(seed, Options{Persona: Personas()[seed%3], ErrorRate: 0.25, CancelRate: 0.1})
		var evs []Event
		for range 4 {
			evs = append(evs, s.NextRun()...)
		}
		var arr bytes.Buffer
		arr.WriteByte('[')
		for i, ev := range evs {
			if i > 0 {
				arr.WriteByte(',')
			}
			arr.Write(ev.JSON)
		}
		arr.WriteByte(']')
		cmd := exec.Command("node", filepath.Join(dir, "apply.mjs"))
		cmd.Stdin = &arr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("seed %d: oracle: %v", seed, err)
		}
		var got struct {
			Messages any               `json:"messages"`
			State    any               `json:"state"`
			Warnings []json.RawMessage `json:"warnings"`
			Error    any               `json:"error"`
		}
		decodeJSON(t, out, &got)
		if got.Error != nil || len(got.Warnings) > 0 {
			t.Fatalf("seed %d: reference consumer: error %v, warnings %s", seed, got.Error, got.Warnings)
		}
		th := reduce(t, s.ThreadID(), evs)
		var msgs, state any
		decodeJSON(t, th.AppendMessages(nil), &msgs)
		decodeJSON(t, th.AppendState(nil), &state)
		if !reflect.DeepEqual(state, got.State) {
			t.Errorf("seed %d: state differs from the reference consumer's", seed)
		}
		if !reflect.DeepEqual(msgs, got.Messages) {
			a, _ := json.Marshal(msgs)
			b, _ := json.Marshal(got.Messages)
			t.Errorf("seed %d: messages differ from the reference consumer's\nours: %.600s\nref:  %.600s", seed, a, b)
		}
	}
}
