package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// membersByJSON is what encoding/json finds in an object: the independent
// reference scanObject is checked against.
func membersByJSON(b []byte) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out, nil
}

func membersByScan(b []byte) (map[string]string, error) {
	out := map[string]string{}
	err := scanObject(b, func(name, v []byte) error {
		var k string
		if err := json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &k); err != nil {
			return err
		}
		out[k] = string(v)
		return nil
	})
	return out, err
}

func checkScan(t *testing.T, b []byte) {
	t.Helper()
	want, werr := membersByJSON(b)
	got, gerr := membersByScan(b)
	if werr != nil {
		return // invalid JSON: the scanner checks structure only
	}
	if gerr != nil {
		t.Fatalf("%.80q: scanObject: %v; encoding/json accepts it", b, gerr)
	}
	if len(got) != len(want) {
		t.Fatalf("%.80q: %d members, encoding/json %d", b, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%.80q: member %q = %.40q, encoding/json %.40q", b, k, got[k], v)
		}
	}
}

func TestScanObject(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":"x\"y","b":[1,{"c":"]"}],"d":null}`,
		`{"s":"\\\\","t":"\\\""}`, `{"view":{"messages":[{"id":"m","content":"a\nb"}]},"events":[]}`,
		`{"a" : true , "b":false}`, `{"n":-1.5e10}`,
	} {
		checkScan(t, []byte(s))
	}
	for _, s := range []string{
		``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":"x}`, `{"a":[1}`, `{"a":{]}`, `{"a":1} x`, `{"a":1 "b":2}`,
	} {
		if _, err := membersByScan([]byte(s)); !errors.Is(err, errScan) {
			t.Errorf("%q: %v, want errScan", s, err)
		}
	}
	// A snapshot reply of the pipeline's test threads, and its events.
	b, err := os.ReadFile("../pipeline/testdata/threads.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		checkScan(t, line)
		var l struct{ Events json.RawMessage }
		_ = json.Unmarshal(line, &l)
		evs, err := scanArray(l.Events)
		var want []json.RawMessage
		_ = json.Unmarshal(l.Events, &want)
		if err != nil || len(evs) != len(want) {
			t.Fatalf("scanArray: %d elements, %v; want %d", len(evs), err, len(want))
		}
		for i := range evs {
			if !bytes.Equal(evs[i], want[i]) {
				t.Fatalf("element %d: %.40q, want %.40q", i, evs[i], want[i])
			}
		}
	}
}

// FuzzScanObject: on every input encoding/json accepts as an object,
// scanObject finds the same members with the same values.
func FuzzScanObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x\\\"y","b":[1,{"c":"]"}]}`, `{"view":{"m":[1,2]},"events":[{"type":"X"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}
