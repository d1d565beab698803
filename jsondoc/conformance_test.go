package jsondoc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/internal/testsupport"
)

type confCase struct {
	Events   []map[string]json.RawMessage `json:"events"`
	Expected struct {
		Messages []struct {
			ID      string          `json:"id"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		State json.RawMessage `json:"state"`
	} `json:"expected"`
	ExpectedWarningIndices []int `json:"expectedWarningIndices"`
	ExpectedErrorIndex     *int  `json:"expectedErrorIndex"`
}

// TestConformance replays the state and activity events of every corpus
// case through Doc, playing the part of the reducer that concerns
// documents: STATE_SNAPSHOT is Set, STATE_DELTA and ACTIVITY_DELTA are
// Apply (unknown ops dropped with a warning, a failing patch warned and
// skipped), ACTIVITY_SNAPSHOT replaces unless replace:false finds an
// existing message. Events from the expected fatal error on are not
// replayed. It checks the final state and activity contents, and that
// warnings arise exactly at the expected indices.
func TestConformance(t *testing.T) {
	conformanceDir := filepath.Join(testsupport.ConformanceDir(t), "cases")
	files, err := filepath.Glob(filepath.Join(conformanceDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance cases in %s (err %v)", conformanceDir, err)
	}
	ran := 0
	for _, f := range files {
		base := filepath.Base(f)
		if !strings.HasPrefix(base, "state--") && !strings.HasPrefix(base, "activity--") {
			continue
		}
		ran++
		t.Run(strings.TrimSuffix(base, ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c confCase
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			state := mustParse(t, `{}`)
			activities := map[string]*Doc{}
			var warnings []int
			for i, ev := range c.Events {
				if c.ExpectedErrorIndex != nil && i >= *c.ExpectedErrorIndex {
					break
				}
				var typ string
				_ = json.Unmarshal(ev["type"], &typ)
				switch typ {
				case "STATE_SNAPSHOT":
					if err := state.Set(ev["snapshot"]); err != nil {
						t.Fatalf("event %d: Set: %v", i, err)
					}
				case "STATE_DELTA":
					if applyWarns(t, state, ev["delta"]) {
						warnings = append(warnings, i)
					}
				case "ACTIVITY_SNAPSHOT":
					var id string
					_ = json.Unmarshal(ev["messageId"], &id)
					if _, ok := activities[id]; ok && string(ev["replace"]) == "false" {
						continue
					}
					d, err := Parse(ev["content"])
					if err != nil {
						t.Fatalf("event %d: Parse: %v", i, err)
					}
					activities[id] = d
				case "ACTIVITY_DELTA":
					var id string
					_ = json.Unmarshal(ev["messageId"], &id)
					d, ok := activities[id]
					if !ok {
						warnings = append(warnings, i) // delta for a missing message
						continue
					}
					if applyWarns(t, d, ev["patch"]) {
						warnings = append(warnings, i)
					}
				}
			}
			assertJSON(t, state, string(c.Expected.State))
			for _, m := range c.Expected.Messages {
				if m.Role != "activity" {
					continue
				}
				d, ok := activities[m.ID]
				if !ok {
					t.Fatalf("activity %s missing", m.ID)
				}
				assertJSON(t, d, string(m.Content))
			}
			if !slices.Equal(warnings, c.ExpectedWarningIndices) && !(len(warnings) == 0 && len(c.ExpectedWarningIndices) == 0) {
				t.Fatalf("warnings at %v, want %v", warnings, c.ExpectedWarningIndices)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no state-- or activity-- cases in the corpus")
	}
}

// applyWarns applies one delta and reports whether it caused a warning
// (an unknown op dropped, or the patch failing to apply).
func applyWarns(t *testing.T, d *Doc, patch []byte) bool {
	t.Helper()
	ops, dropped, ok := decodePatchDropping(patch)
	if !ok {
		t.Fatalf("malformed patch before the expected error: %s", patch)
	}
	before := string(d.AppendJSON(nil))
	if err := d.Apply(ops); err != nil {
		if after := string(d.AppendJSON(nil)); after != before {
			t.Fatalf("failed patch changed the document: %s -> %s", before, after)
		}
		return true
	}
	return dropped > 0
}
