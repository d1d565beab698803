package viewchange_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"testing"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/web/viewchange"
)

// step is one line of testdata/replay.mjs's input.
type step struct {
	Payload json.RawMessage `json:"payload"`
	Want    json.RawMessage `json:"want,omitempty"`
	Resync  bool            `json:"resync,omitempty"`
}

func viewPayload(th *reducer.Thread) json.RawMessage {
	b := []byte(`{"type":"view","seq":` + strconv.FormatUint(th.Seq(), 10) + `,"view":`)
	b = th.AppendView(b)
	return append(b, '}')
}

func changesPayload(th *reducer.Thread, prev uint64, c *reducer.Changes) json.RawMessage {
	b := []byte(`{"type":"changes","seq":` + strconv.FormatUint(th.Seq(), 10) + `,"prev":` + strconv.FormatUint(prev, 10) + `,"changes":`)
	b = viewchange.Append(b, th, c)
	return append(b, '}')
}

// record applies a demo thread to a reducer, flushing the change journal
// after random numbers of events, and returns the view-mode payloads a
// subscriber joining at the start would get, each with the view the
// reducer holds at that point.
func record(t *testing.T, seed uint64) []step {
	t.Helper()
	s := demo.NewScript(seed, demo.Options{Persona: demo.Personas()[seed%3], ErrorRate: 0.3, CancelRate: 0.1})
	var evs []demo.Event
	for range 4 {
		evs = append(evs, s.NextRun()...)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	th := reducer.NewThread(s.ThreadID())
	var d codec.Decoder
	var e codec.Event
	steps := []step{{Payload: viewPayload(th), Want: th.AppendView(nil)}}
	th.Flush()
	prev := th.Seq()
	for i := 0; i < len(evs); {
		for n := 1 + r.IntN(30); n > 0 && i < len(evs); n-- {
			if err := d.Decode(evs[i].JSON, &e); err != nil {
				t.Fatal(err)
			}
			if res := th.Apply(uint64(i+1), &e); res.Fatal != nil {
				t.Fatal(res.Fatal)
			}
			i++
		}
		steps = append(steps, step{Payload: changesPayload(th, prev, th.Flush()), Want: th.AppendView(nil)})
		prev = th.Seq()
	}
	return steps
}

// replay runs testdata/replay.mjs, the driver of the dashboard's own
// applier (static/viewdoc.js), on steps.
func replay(t *testing.T, steps []step) (ok int, errs []string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed: the dashboard's applier (JavaScript) cannot run")
	}
	var in bytes.Buffer
	for _, s := range steps {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(node, "../testdata/replay.mjs")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("replay.mjs: %v", err)
	}
	var res struct {
		OK     int      `json:"ok"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return res.OK, res.Errors
}

// TestDashboardAppliesChanges is the contract test of the view mode: the
// dashboard's applier, fed the first view and then every change document,
// holds exactly the reducer's view after each one.
func TestDashboardAppliesChanges(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(0); seed < 6; seed++ {
		steps := record(t, seed)
		for _, s := range steps {
			for _, k := range []string{`"append":`, `"message":{`, `"statePatch":`, `"state":`, `"runs":`, `"messages":`} {
				if bytes.Contains(s.Payload, []byte(k)) {
					kinds[k]++
				}
			}
		}
		ok, errs := replay(t, steps)
		for _, e := range errs {
			t.Errorf("seed %d: %s", seed, e)
		}
		if ok != len(steps) {
			t.Errorf("seed %d: %d of %d steps applied", seed, ok, len(steps))
		}
	}
	// Every kind of change but a structural one (demo streams never
	// reorder messages) must have been exercised.
	for _, k := range []string{`"append":`, `"message":{`, `"statePatch":`, `"state":`, `"runs":`} {
		if kinds[k] == 0 {
			t.Errorf("no change document with %s", k)
		}
	}
	t.Logf("change kinds exercised: %v", kinds)
}

// TestDashboardRefusesWhatItCannotApply checks that each way of losing
// track makes the applier ask for a resync instead of showing a wrong view.
func TestDashboardRefusesWhatItCannotApply(t *testing.T) {
	steps := record(t, 1)
	first, second := steps[0], steps[1]
	var p struct {
		Seq     uint64          `json:"seq"`
		Prev    uint64          `json:"prev"`
		Changes json.RawMessage `json:"changes"`
	}
	if err := json.Unmarshal(second.Payload, &p); err != nil {
		t.Fatal(err)
	}
	mk := func(seq, prev uint64, changes string) json.RawMessage {
		return json.RawMessage(`{"type":"changes","seq":` + strconv.FormatUint(seq, 10) + `,"prev":` + strconv.FormatUint(prev, 10) + `,"changes":` + changes + `}`)
	}
	tests := []struct {
		name string
		give json.RawMessage
	}{
		{"gap in seq", mk(p.Seq, p.Prev+1, string(p.Changes))},
		{"message count off", mk(p.Seq, p.Prev, `{"seq":`+strconv.FormatUint(p.Seq, 10)+`,"count":9999,"status":"running","warnings":0,"error":null}`)},
		{"patch does not apply", mk(p.Seq, p.Prev, `{"seq":`+strconv.FormatUint(p.Seq, 10)+`,"count":0,"status":"running","warnings":0,"error":null,"statePatch":[[{"op":"replace","path":"/nope/0","value":1}]]}`)},
		{"append to a missing message", mk(p.Seq, p.Prev, `{"seq":`+strconv.FormatUint(p.Seq, 10)+`,"count":0,"status":"running","warnings":0,"error":null,"changed":[{"index":5,"append":"x"}]}`)},
		{"unknown payload type", json.RawMessage(`{"type":"surprise","seq":1}`)},
		{"seq mismatch inside", mk(p.Seq, p.Prev, `{"seq":1234567,"count":0,"status":"running","warnings":0,"error":null}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, errs := replay(t, []step{first, {Payload: tt.give, Resync: true}})
			if ok != 2 || len(errs) > 0 {
				t.Fatalf("ok %d, errors %v", ok, errs)
			}
		})
	}
}
