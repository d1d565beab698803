package jsondoc

import (
	"encoding/json"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// opKinds maps RFC 6902 names to codec kinds; test helpers decode patches
// themselves so this package's tests do not depend on the codec's decoder.
var opKinds = map[string]codec.OpKind{
	"add": codec.OpAdd, "remove": codec.OpRemove, "replace": codec.OpReplace,
	"move": codec.OpMove, "copy": codec.OpCopy, "test": codec.OpTest,
}

// decodePatch turns a JSON patch into codec ops the way the codec does:
// ops with an unknown "op" are dropped and counted; ok is false when the
// patch is malformed (missing or mistyped member, bad pointer), which the
// codec rejects as fatal.
func decodePatch(raw []byte) (ops []codec.PatchOp, ok bool) {
	ops, dropped, ok := decodePatchDropping(raw)
	return ops, ok && dropped == 0
}

func decodePatchDropping(raw []byte) (ops []codec.PatchOp, dropped int, ok bool) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, 0, false
	}
	for _, it := range items {
		var op codec.PatchOp
		var name string
		if json.Unmarshal(it["op"], &name) != nil {
			return nil, 0, false
		}
		k, known := opKinds[name]
		if !known {
			dropped++
			continue
		}
		op.Op = k
		if json.Unmarshal(it["path"], &op.Path) != nil || !checkPointer(op.Path) {
			return nil, 0, false
		}
		if k == codec.OpMove || k == codec.OpCopy {
			if json.Unmarshal(it["from"], &op.From) != nil || !checkPointer(op.From) {
				return nil, 0, false
			}
		}
		if v, has := it["value"]; has {
			op.Value = codec.Raw(v)
		} else if k == codec.OpAdd || k == codec.OpReplace || k == codec.OpTest {
			return nil, 0, false
		}
		ops = append(ops, op)
	}
	return ops, dropped, true
}

func mustPatch(t testing.TB, s string) []codec.PatchOp {
	t.Helper()
	ops, ok := decodePatch([]byte(s))
	if !ok {
		t.Fatalf("malformed test patch %s", s)
	}
	return ops
}

func mustParse(t testing.TB, s string) *Doc {
	t.Helper()
	d, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%s): %v", s, err)
	}
	return d
}

// assertJSON checks d against want by semantic equality, and that d's
// output is valid JSON.
func assertJSON(t testing.TB, d *Doc, want string) {
	t.Helper()
	got := d.AppendJSON(nil)
	if !json.Valid(got) {
		t.Fatalf("AppendJSON produced invalid JSON: %s", got)
	}
	eq, err := Equal(got, []byte(want))
	if err != nil {
		t.Fatalf("Equal(%s, %s): %v", got, want, err)
	}
	if !eq {
		t.Fatalf("got %s, want %s", got, want)
	}
}
