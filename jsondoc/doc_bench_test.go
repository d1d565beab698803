package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/bytedance/sonic/ast"
	"github.com/threadcast/threadcast/codec"
)

// Benchmarks. The claim under test: a one-op delta costs the same on a
// 10 KB, 1 MB and 10 MB state (ns/op and allocs/op flat across sizes),
// against the naive approach (encoding/json unmarshal into any, apply,
// marshal), whose cost grows with the document. Each jsondoc sub-benchmark
// reports speedup-x = naive ns/op ÷ jsondoc ns/op for the same size.
//
//	go test -run '^$' -bench . -benchmem ./jsondoc/

// benchSizes are the target document sizes.
var benchSizes = []struct {
	name  string
	bytes int
}{{"10KB", 10 << 10}, {"1MB", 1 << 20}, {"10MB", 10 << 20}}

// stateDoc builds a realistic agent state of about size bytes: a few
// scalar fields, an "items" array of records and a "byId" object indexing
// the same kind of records, the shape STATE_SNAPSHOTs of planning and
// retrieval agents take.
func stateDoc(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"status":"running","counter":0,"meta":{"model":"m-1","temperature":0.2},"items":[`)
	rec := func(i int) string {
		return fmt.Sprintf(`{"id":"id-%d","title":"Step %d of the plan, with some descriptive text","done":%v,"score":%d.5,"tags":["a","b","c"]}`, i, i, i%2 == 0, i)
	}
	n := 0
	for ; b.Len() < size/2; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(rec(n))
	}
	b.WriteString(`],"byId":{`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"id-%d":%s`, i, rec(i))
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// deltaOps are the one-op deltas cycled through: a top-level counter, a
// member three levels down, and an append / remove-last pair on the big
// array (so the document size stays stable across iterations). n is the
// array's length before the append.
func deltaOps(i, n int) []codec.PatchOp {
	v := codec.Raw(strconv.Itoa(i))
	switch i % 4 {
	case 0:
		return []codec.PatchOp{{Op: codec.OpReplace, Path: "/counter", Value: v}}
	case 1:
		return []codec.PatchOp{{Op: codec.OpReplace, Path: "/byId/id-7/score", Value: v}}
	case 2:
		return []codec.PatchOp{{Op: codec.OpAdd, Path: "/items/-", Value: codec.Raw(`{"id":"new","done":false}`)}}
	default:
		return []codec.PatchOp{{Op: codec.OpRemove, Path: "/items/" + strconv.Itoa(n)}}
	}
}

// warmUp splits the containers the benchmarked deltas go through, so the
// loop measures the steady state (BenchmarkFirstDelta measures the split).
func warmUp(tb testing.TB, d *Doc) {
	for _, p := range []string{"/items/0", "/byId/id-3/title", "/byId/id-7/score", "/counter"} {
		if _, err := d.Get(nil, p); err != nil {
			tb.Fatal(err)
		}
	}
}

// itemsLen is the length of the "items" array of a stateDoc.
func itemsLen(tb testing.TB, raw []byte) int {
	var v struct{ Items []json.RawMessage }
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Fatal(err)
	}
	return len(v.Items)
}

func BenchmarkApplyOneOpDelta(b *testing.B) {
	for _, sz := range benchSizes {
		raw := stateDoc(sz.bytes)
		patches := make([][]codec.PatchOp, 4)
		for i := range patches {
			patches[i] = deltaOps(i, itemsLen(b, raw))
		}
		var naiveNs float64
		b.Run("size="+sz.name+"/impl=naive", func(b *testing.B) {
			cur := raw
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for i := 0; b.Loop(); i++ {
				var err error
				if cur, err = naiveApply(cur, patches[i%4]); err != nil {
					b.Fatal(err)
				}
			}
			naiveNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run("size="+sz.name+"/impl=jsondoc", func(b *testing.B) {
			d, err := Parse(raw)
			if err != nil {
				b.Fatal(err)
			}
			// The first delta through a container splits it once (one scan of
			// its text); BenchmarkFirstDelta measures that. Here: steady state.
			for i := range 4 {
				if err := d.Apply(patches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := d.Apply(patches[i%4]); err != nil {
					b.Fatal(err)
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if naiveNs > 0 {
				b.ReportMetric(naiveNs/ns, "speedup-x")
			}
		})
	}
}

// BenchmarkVsSonicAST weighs the alternative named in doc.go: sonic's lazy
// ast.Node, doing the same deep replace and writing the document out after
// each delta (what the reducer does to publish a view). ast.Node has no
// rollback, so its numbers are for a non-atomic apply.
func BenchmarkVsSonicAST(b *testing.B) {
	for _, sz := range benchSizes {
		raw := stateDoc(sz.bytes)
		b.Run("size="+sz.name+"/impl=sonic_ast", func(b *testing.B) {
			root := ast.NewRaw(string(raw))
			if _, err := root.GetByPath("byId", "id-7").Set("score", ast.NewNumber("0")); err != nil {
				b.Fatal(err) // warm-up: the lazy nodes on the path are loaded once
			}
			var out []byte
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				n := root.GetByPath("byId", "id-7")
				if _, err := n.Set("score", ast.NewNumber(strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
				var err error
				if out, err = root.MarshalJSON(); err != nil || len(out) < len(raw)/2 {
					b.Fatal(err)
				}
			}
		})
		b.Run("size="+sz.name+"/impl=jsondoc", func(b *testing.B) {
			d, err := Parse(raw)
			if err != nil {
				b.Fatal(err)
			}
			warmUp(b, d)
			var out []byte
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ops := []codec.PatchOp{{Op: codec.OpReplace, Path: "/byId/id-7/score", Value: codec.Raw(strconv.Itoa(i))}}
				if err := d.Apply(ops); err != nil {
					b.Fatal(err)
				}
				if out = d.AppendJSON(out[:0]); len(out) < len(raw)/2 {
					b.Fatal("short output")
				}
			}
		})
	}
}

// BenchmarkMoveModifiedSubtree moves the large, already modified "byId"
// object back and forth: O(depth), like every other op, because a move
// neither copies nor measures what it moves.
func BenchmarkMoveModifiedSubtree(b *testing.B) {
	ops := [][]codec.PatchOp{
		{{Op: codec.OpMove, From: "/byId", Path: "/moved"}},
		{{Op: codec.OpMove, From: "/moved", Path: "/byId"}},
	}
	for _, sz := range benchSizes {
		b.Run("size="+sz.name, func(b *testing.B) {
			d, err := Parse(stateDoc(sz.bytes))
			if err != nil {
				b.Fatal(err)
			}
			warmUp(b, d)
			if err := d.Apply(deltaOps(1, 0)); err != nil { // dirty /byId
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := d.Apply(ops[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkArrayInsert inserts and removes one element at the front and
// in the middle of the big "items" array. Arrays are deques (node.insert),
// so the front is O(1) at every size; the middle moves half the element
// pointers (8 bytes each, no re-encoding) and is the one delta whose cost
// grows with the document.
func BenchmarkArrayInsert(b *testing.B) {
	for _, sz := range benchSizes {
		raw := stateDoc(sz.bytes)
		mid := strconv.Itoa(itemsLen(b, raw) / 2)
		for _, pos := range []struct{ name, tok string }{{"front", "0"}, {"middle", mid}} {
			ops := []codec.PatchOp{
				{Op: codec.OpAdd, Path: "/items/" + pos.tok, Value: codec.Raw(`{"id":"new"}`)},
				{Op: codec.OpRemove, Path: "/items/" + pos.tok},
			}
			b.Run("size="+sz.name+"/at="+pos.name, func(b *testing.B) {
				d, err := Parse(raw)
				if err != nil {
					b.Fatal(err)
				}
				warmUp(b, d)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := d.Apply(ops[i%2 : i%2+1]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFailingDelta: a patch whose second op fails is rolled back;
// its cost must not depend on the document either.
func BenchmarkFailingDelta(b *testing.B) {
	ops := []codec.PatchOp{
		{Op: codec.OpReplace, Path: "/byId/id-3/title", Value: codec.Raw(`"x"`)},
		{Op: codec.OpTest, Path: "/counter", Value: codec.Raw(`-1`)},
	}
	for _, sz := range benchSizes {
		b.Run("size="+sz.name, func(b *testing.B) {
			d, err := Parse(stateDoc(sz.bytes))
			if err != nil {
				b.Fatal(err)
			}
			warmUp(b, d)
			b.ReportAllocs()
			for b.Loop() {
				if d.Apply(ops) == nil {
					b.Fatal("patch applied, want failure")
				}
			}
		})
	}
}

// BenchmarkFirstDelta is Parse plus the first delta: one copy, one
// validation and one split of each container on the path. It is O(size)
// by design; compare with naive's per-delta cost above.
func BenchmarkFirstDelta(b *testing.B) {
	ops := deltaOps(1, 0)
	for _, sz := range benchSizes {
		raw := stateDoc(sz.bytes)
		b.Run("size="+sz.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				d, err := Parse(raw)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Apply(ops); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, sz := range benchSizes {
		raw := stateDoc(sz.bytes)
		b.Run("size="+sz.name+"/impl=jsondoc", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := Parse(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("size="+sz.name+"/impl=encoding_json_valid_copy", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if !json.Valid(raw) {
					b.Fatal("invalid")
				}
				_ = append([]byte(nil), raw...)
			}
		})
	}
}

// BenchmarkAppendJSON writes out a 1 MB document after a delta (dirty
// root: members re-joined, subtrees copied verbatim), against
// encoding/json marshalling the same value from an any tree.
func BenchmarkAppendJSON(b *testing.B) {
	raw := stateDoc(1 << 20)
	b.Run("impl=jsondoc/clean", func(b *testing.B) {
		d, _ := Parse(raw)
		var buf []byte
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			buf = d.AppendJSON(buf[:0])
		}
	})
	b.Run("impl=jsondoc/after-delta", func(b *testing.B) {
		d, _ := Parse(raw)
		if err := d.Apply(deltaOps(1, 0)); err != nil {
			b.Fatal(err)
		}
		var buf []byte
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			buf = d.AppendJSON(buf[:0])
		}
	})
	b.Run("impl=encoding_json", func(b *testing.B) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMergeShallow merges a small metadata object into an object of
// 10 or 1000 members, against unmarshal-merge-marshal.
func BenchmarkMergeShallow(b *testing.B) {
	patch := []byte(`{"tenant":"t-1","trace":{"id":"abc","span":7},"k5":null}`)
	for _, n := range []int{10, 1000} {
		var buf bytes.Buffer
		buf.WriteByte('{')
		for i := range n {
			if i > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `"k%d":{"v":%d}`, i, i)
		}
		buf.WriteByte('}')
		base := buf.Bytes()
		b.Run(fmt.Sprintf("members=%d/impl=jsondoc", n), func(b *testing.B) {
			d, _ := Parse(base)
			b.ReportAllocs()
			for b.Loop() {
				if err := d.MergeShallow(patch); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("members=%d/impl=encoding_json", n), func(b *testing.B) {
			cur := base
			b.ReportAllocs()
			for b.Loop() {
				var m, p map[string]json.RawMessage
				if err := json.Unmarshal(cur, &m); err != nil {
					b.Fatal(err)
				}
				if err := json.Unmarshal(patch, &p); err != nil {
					b.Fatal(err)
				}
				for k, v := range p {
					m[k] = v
				}
				var err error
				if cur, err = json.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// naiveApply is the baseline: decode the whole state, apply with the
// reference applier from fuzz_test.go, encode the whole state.
func naiveApply(raw []byte, ops []codec.PatchOp) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v, ok := refApply(v, ops)
	if !ok {
		return nil, fmt.Errorf("naive apply failed")
	}
	return json.Marshal(v)
}

// BenchmarkSmallDocs is the reducer's short-thread workload in miniature:
// documents of a few members, created from a snapshot, patched by one-op
// deltas and merged into shallowly, where allocations per operation, not
// document size, decide the cost. One iteration is one document's life.
func BenchmarkSmallDocs(b *testing.B) {
	mustOps := func(s string) []codec.PatchOp {
		ops, ok := decodePatch([]byte(s))
		if !ok {
			b.Fatalf("bad patch %s", s)
		}
		return ops
	}
	b.Run("state", func(b *testing.B) {
		snapshot := codec.Raw(`{"version":4,"items":[-3],"settings":{"delta":false,"alpha":{},"gamma":"it option"}}`)
		deltas := [][]codec.PatchOp{
			mustOps(`[{"op":"add","path":"/alpha","value":4017}]`),
			mustOps(`[{"op":"replace","path":"/version","value":5}]`),
			mustOps(`[{"op":"add","path":"/items/-","value":"to search with"}]`),
			mustOps(`[{"op":"add","path":"/settings/beta","value":true},{"op":"remove","path":"/alpha"}]`),
			mustOps(`[{"op":"test","path":"/items/0","value":-3},{"op":"copy","from":"/items/0","path":"/items/-"}]`),
		}
		b.ReportAllocs()
		for b.Loop() {
			d, err := ParseDecoded(snapshot)
			if err != nil {
				b.Fatal(err)
			}
			for _, ops := range deltas {
				if err := d.ApplyDecoded(ops); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("metadata", func(b *testing.B) {
		first := codec.Raw(`{"acme.seq":true}`)
		merges := []codec.Raw{codec.Raw(`{"acme.trace":"t-1"}`), codec.Raw(`{"acme.seq":false,"tenant":"t"}`)}
		b.ReportAllocs()
		for b.Loop() {
			d, err := ParseDecoded(first)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range merges {
				if err := d.MergeShallowDecoded(m); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkCompactInPlace copies and compacts wire-shaped texts, as every
// decoded value entering a Doc is: already compact ones (nearly all),
// whose strings hold spaces or not, and one with whitespace to remove,
// against encoding/json.Compact.
func BenchmarkCompactInPlace(b *testing.B) {
	texts := []struct{ name, text string }{
		{"metadata", `{"acme.model":true,"acme.finish":[7],"acme.tokens":true}`},
		{"content", `{"theta":1000,"alpha":{"epsilon":"option reasoning search","iota":12.25}}`},
		{"spaced", `{"theta": 1000, "alpha": {"epsilon": "option reasoning search"}}`},
	}
	for _, tt := range texts {
		src := []byte(tt.text)
		buf := make([]byte, len(src))
		want, ok := compactInPlace(bytes.Clone(src))
		if !ok {
			b.Fatalf("%s: rejected", tt.name)
		}
		b.Run(tt.name+"/impl=jsondoc", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				got, ok := compactInPlace(buf[:copy(buf, src)])
				if !ok || len(got) != len(want) {
					b.Fatalf("compactInPlace = %q, %v", got, ok)
				}
			}
		})
		b.Run(tt.name+"/impl=encoding_json", func(b *testing.B) {
			var out bytes.Buffer
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := json.Compact(&out, src); err != nil || out.Len() != len(want) {
					b.Fatalf("json.Compact = %q, %v", out.Bytes(), err)
				}
			}
		})
	}
}
