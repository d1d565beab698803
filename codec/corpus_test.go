package codec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// corpusCase is the part of a conformance file the codec is held to.
type corpusCase struct {
	file string
	// events are the raw bytes of each event as written in the file.
	events [][]byte
	// fatalAt is the index of the expected fatal error, or -1 (official
	// files only say whether the stream fails: failed).
	fatalAt int
	failed  bool
	// warnAt are the indices where the case expects warnings (cases/ only;
	// nil when the file does not say).
	warnAt map[int]bool
	// input is a RunAgentInput or `initial` the run starts from (raw).
	input   []byte
	initial []byte
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	conformanceDir := testsupport.ConformanceDir(t)
	var out []corpusCase
	for _, dir := range []string{"cases", "official"} {
		files, err := filepath.Glob(filepath.Join(conformanceDir, dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no conformance files in %s/%s", conformanceDir, dir)
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Events                 []json.RawMessage `json:"events"`
				Stream                 []json.RawMessage `json:"stream"`
				ExpectedErrorIndex     *int              `json:"expectedErrorIndex"`
				ExpectedWarningIndices []int             `json:"expectedWarningIndices"`
				Input                  json.RawMessage   `json:"input"`
				Initial                json.RawMessage   `json:"initial"`
				Expect                 struct {
					Outcome string `json:"outcome"`
				} `json:"expect"`
			}
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			c := corpusCase{file: filepath.Join(dir, filepath.Base(f)), fatalAt: -1, input: raw.Input, initial: raw.Initial}
			evs := raw.Events
			if dir == "official" {
				evs = raw.Stream
			}
			for _, e := range evs {
				c.events = append(c.events, []byte(e))
			}
			if raw.ExpectedErrorIndex != nil {
				c.fatalAt = *raw.ExpectedErrorIndex
			}
			c.failed = raw.ExpectedErrorIndex != nil || raw.Expect.Outcome == "failed"
			if dir == "cases" {
				c.warnAt = map[int]bool{}
				for _, w := range raw.ExpectedWarningIndices {
					c.warnAt[w] = true
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// TestCorpusDecodes decodes every event of the conformance corpus. An event
// may fail to decode only where the case expects a fatal error at that index
// (verdict Fatal) or a warning (verdict Drop); a case's fatal may equally be a
// sequence rule the reducer enforces, so not every expected fatal must come
// from the codec. Every event that decodes must round-trip through
// AppendEvent unchanged.
func TestCorpusDecodes(t *testing.T) {
	var d, d2 Decoder
	var ev, ev2 Event
	cases := loadCorpus(t)
	codecFatals := 0
	for _, c := range cases {
		// cases/ are judged as a strict AG-UI 1.0 consumer; official/ are
		// 1.1 fixtures (a 1.1 declaration there must be quiet).
		version := "1.1"
		if c.warnAt != nil {
			version = "1.0"
		}
		if err := d.SetProtocolVersion(version); err != nil {
			t.Fatal(err)
		}
		for i, data := range c.events {
			err := d.Decode(data, &ev)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%s event %d: error %v is not an *Error", c.file, i, err)
				}
				switch {
				case e.Verdict == Fatal && (i == c.fatalAt || c.fatalAt < 0 && c.failed):
					codecFatals++
					// Nothing after a fatal is applied; stop at the first.
					goto next
				case e.Verdict == Drop && (c.warnAt == nil || c.warnAt[i]):
				default:
					t.Errorf("%s event %d: unexpected %v", c.file, i, err)
				}
				continue
			}
			if i == c.fatalAt {
				t.Logf("%s event %d: fatal expected, left to the reducer (%s)", c.file, i, ev.Type)
			}
			if c.warnAt != nil && !c.warnAt[i] && len(d.Warnings()) > 0 {
				t.Errorf("%s event %d: warnings where the case expects none: %v", c.file, i, d.Warnings())
			}
			enc := AppendEvent(nil, &ev)
			if err := d2.Decode(enc, &ev2); err != nil {
				t.Errorf("%s event %d: re-decode of %s: %v", c.file, i, enc, err)
				continue
			}
			if hasStrip(d2.Warnings()) {
				t.Errorf("%s event %d: re-encoded event warns: %v", c.file, i, d2.Warnings())
			}
			if diff := eventDiff(&ev, &ev2); diff != "" {
				t.Errorf("%s event %d: round trip differs: %s\n in: %s\nout: %s", c.file, i, diff, data, enc)
			}
		}
	next:
		if c.input != nil {
			var in RunInput
			if err := d.DecodeRunInput(c.input, &in); err != nil {
				t.Errorf("%s input: %v", c.file, err)
			}
		}
	}
	if codecFatals == 0 {
		t.Error("no expected fatal of the corpus was found by the codec")
	}
	t.Logf("%d files; %d expected fatals are codec-level", len(cases), codecFatals)
}

func hasStrip(ws []*Error) bool {
	for _, w := range ws {
		if w.Verdict == Strip {
			return true
		}
	}
	return false
}

// TestTypeSpecsMatchFieldsJSON checks the decoder's per-type schema against
// the machine-readable spec table (testdata/spec/fields.json). The one
// deliberate difference is encryptedValueType on REASONING_ENCRYPTED_VALUE,
// the AG-UI 1.1 field this codec knows.
func TestTypeSpecsMatchFieldsJSON(t *testing.T) {
	data, err := os.ReadFile(testsupport.Path(t, "testdata/spec/fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	for typ := Type(1); typ < numTypes; typ++ {
		var def struct {
			Required, Optional []string
		}
		raw, ok := spec[typ.String()]
		if !ok {
			t.Errorf("%s missing from fields.json", typ)
			continue
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		var req, all FieldSet
		for _, n := range def.Required {
			f, ok := fieldByName(n)
			if !ok {
				t.Fatalf("%s: unknown field %q", typ, n)
			}
			req, all = req.With(f), all.With(f)
		}
		for _, n := range def.Optional {
			f, ok := fieldByName(n)
			if !ok {
				t.Fatalf("%s: unknown field %q", typ, n)
			}
			all = all.With(f)
		}
		if typ == TypeReasoningEncryptedValue {
			all = all.With(FieldEncryptedValueType)
		}
		if typeSpecs[typ].required != req || typeSpecs[typ].allowed != all {
			t.Errorf("%s: codec allows %b requires %b; fields.json allows %b requires %b",
				typ, typeSpecs[typ].allowed, typeSpecs[typ].required, all, req)
		}
	}
}
