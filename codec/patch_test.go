package codec

import (
	"encoding/json"
	"reflect"
	"testing"
)

// patchRef is the collect-then-judge JSON Patch decoder that patch replaced
// (collectArray, then collectObject per operation, then find per member),
// kept as it was (it shares only opKind, the op-name table) as the
// reference for FuzzPatchMatchesReference: the one-pass
// patch must return the same operations, text, offsets, errors and warnings.
func (d *Decoder) patchRef(i int) ([]PatchOp, Raw, int, *Error) {
	end, base, n, err := d.collectArray(i)
	defer d.truncate(base)
	if err != nil {
		return nil, nil, end, err
	}
	start := len(d.ops)
	for k := base; k < base+n; k++ {
		var op PatchOp
		keep, err := d.patchOpRef(d.members[k].vstart, d.members[k].vend, &op)
		if err != nil {
			return nil, nil, end, err.prefixField(indexSeg("", k-base))
		}
		if !keep {
			d.warns[len(d.warns)-1].prefixField(indexSeg("", k-base))
			d.members[k].drop = true
			continue
		}
		d.ops = append(d.ops, op)
	}
	ops := d.ops[start:len(d.ops):len(d.ops)]
	if len(ops) == 0 {
		ops = []PatchOp{}
	}
	return ops, d.rebuild(i, end, base, n, false), end, nil
}

func (d *Decoder) patchOpRef(i, end int, op *PatchOp) (bool, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (patch operation)")
		return false, err
	}
	_, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return false, err
	}
	name, ok, err := d.discriminator(base, n, i, "op", "a patch operation")
	if err != nil {
		return false, err
	}
	var known bool
	if op.Op, known = opKind(name); !known {
		d.warn(KindUnknownValue, Strip, d.members[ok].vstart, "op", "patch operation "+quote(s2b(name))+" is not RFC 6902; removed, the rest applies")
		return false, nil
	}
	op.Raw = d.data[i:end:end]
	if op.Path, err = d.pointerRef(base, n, i, "path", name); err != nil {
		return false, err
	}
	if op.Op == OpMove || op.Op == OpCopy {
		if op.From, err = d.pointerRef(base, n, i, "from", name); err != nil {
			return false, err
		}
	}
	if op.Op == OpAdd || op.Op == OpReplace || op.Op == OpTest {
		k := d.find(base, n, "value")
		if err := d.missing(k, i, "value", "a "+name+" operation"); err != nil {
			return false, err
		}
		op.Value = d.data[d.members[k].vstart:d.members[k].vend:d.members[k].vend]
	}
	return true, nil
}

// pointerRef reads the required JSON Pointer member key of a patch operation.
func (d *Decoder) pointerRef(base, n, pos int, key, op string) (string, *Error) {
	k := d.find(base, n, key)
	if err := d.missing(k, pos, key, "a "+op+" operation"); err != nil {
		return "", err
	}
	s, err := d.strMember(k)
	if err != nil {
		return "", err
	}
	if !ValidPointer(s) {
		return "", d.memberErr(k, KindBadPointer, "not an RFC 6901 JSON Pointer")
	}
	return s, nil
}

// patchSeeds are JSON Patch arrays for the patch fuzzer: the shapes of the
// benchmark fixtures plus every way to be malformed, in every order.
var patchSeeds = []string{
	`[]`,
	` [ ] `,
	`[{"op":"add","path":"/alpha","value":4017}]`,
	`[{"op":"add","path":"/a~1b","value":false},{"op":"remove","path":"/alpha"},{"op":"move","from":"/a~1b","path":"/eta_move42"},{"op":"add","path":"/kappa","value":null}]`,
	`[{"op":"replace","path":"/settings","value":["snapshot","user response"]},{"op":"test","path":"/settings/2","value":{"zeta":12.25,"x y":1000}}]`,
	` [ { "op" : "copy" , "from" : "" , "path" : "/x" , "extra" : [1,{"a":[]}] } , {"path":"/y","op":"remove"} ] trailing`,
	// Repeated names: the last one wins.
	`[{"op":"frob","op":"add","path":7,"path":"/a","value":1,"value":2}]`,
	`[{"op":"add","op":1,"path":"/a","value":1}]`,
	`[{"op":"remove","path":"/a","path":null}]`,
	`[{"op":"move","from":"/a","from":"bad","path":"/b"}]`,
	// Escaped names and values.
	`[{"o\u0070":"\u0061dd","p\u0061th":"/\u007e1","v\u0061lue":"\ud83d\ude00"}]`,
	`[{"op":"add","path":"/a\"b","value":"x\\"}]`,
	// Names a byte away from the four slotAt matches as words, and those
	// four cut off by the end of the input.
	`[{"opx":"add","op":"add","pathx":"/q","path":"/a","values":1,"value":2,"fro":"/b","fromx":"/c"}]`,
	`[{"o":"add","pat":"/a","valu":1,"op":"move","from":"/b","path":"/c"}]`,
	`[{"op":"add","path":"/a","value"`, `[{"op":"add","path":"/a","val`, `[{"op":"add","pa`, `[{"o`,
	`[{"op" :"add","path" :"/a","value" :1,"from" :"/b"}]`, `[{"op":"add","path":"/a","value"x1}]`,
	// Unknown ops: dropped with a warning, the rest kept.
	`[{"op":"frob","path":"/b"}]`,
	`[{"op":"add","path":"/a","value":1},{"op":"frob"},{"op":"remove","path":"/c","value":"stray"},{"op":"ADD"}]`,
	`[{"op":"frob"},{"op":"remove"}]`,
	`[{"op":"frob"},{"op":"remove","path":"/a"},[}]`,
	// Malformed operations.
	`[1]`, `[null]`, `["op"]`, `[[]]`, `[{}]`,
	`[{"path":"/a"}]`, `[{"op":1,"path":"/a"}]`, `[{"op":null}]`, `[{"op":{}}]`,
	`[{"op":"remove"}]`, `[{"op":"remove","path":7}]`, `[{"op":"remove","path":null}]`,
	`[{"op":"remove","path":"a/b"}]`, `[{"op":"remove","path":"/a~2"}]`, `[{"op":"remove","path":"/a~"}]`,
	`[{"op":"add","path":"/a"}]`, `[{"op":"replace","path":"/a"}]`, `[{"op":"test","path":"/a"}]`,
	`[{"op":"move","path":"/a"}]`, `[{"op":"copy","from":"x","path":"/a"}]`, `[{"op":"copy","from":[],"path":"/a"}]`,
	`[{"op":"move","from":"/a"}]`,
	// A malformed operation before a syntax error: the syntax error wins.
	`[{"op":"remove"},{"op":"add",}]`,
	`[1,{"op":"add"]`,
	`[{"op":"add","path":"/a"},tru]`,
	`[{"op":"remove","path":7,"x":[}]`,
	`[{"op":"frob"},"\x"]`,
	// Syntax errors.
	`[`, `[{`, `[{"op"`, `[{"op":`, `[{"op":"add"`, `[{"op":"add",`, `[{"op":"add"}`, `[{"op":"add"},`,
	`[{"op":"add"} {}]`, `[{"op" "add"}]`, `[{op:"add"}]`, `[{"op":"a` + "\x01" + `"}]`, `[{"op":"` + "\xff" + `"}]`,
	`[{"op":"add","path":"/a","value":01}]`, `[{"op":"add","path":"/a","value":[1,]}]`, `{"op":"add"}`, ``, ` `,
}

// FuzzPatchMatchesReference: patch and patchRef agree on every input, in
// the operations, the (possibly cleaned) patch text, the end offset, the
// error and the warnings.
func FuzzPatchMatchesReference(f *testing.F) {
	for _, s := range patchSeeds {
		f.Add([]byte(s))
	}
	for _, e := range loadMix(f) {
		var ev struct{ Delta, Patch json.RawMessage }
		if json.Unmarshal(e, &ev) == nil {
			for _, p := range []json.RawMessage{ev.Delta, ev.Patch} {
				if len(p) > 0 && p[0] == '[' {
					f.Add([]byte(p))
				}
			}
		}
	}
	var got, want Decoder
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range []*Decoder{&got, &want} {
			d.Reset()
			d.data = data
			d.typ = TypeStateDelta
		}
		ops, raw, end, err := got.patch(0)
		wops, wraw, wend, werr := want.patchRef(0)
		if !reflect.DeepEqual(err, werr) {
			t.Fatalf("patch(%q) error = %#v\nwant %#v", data, err, werr)
		}
		if !reflect.DeepEqual(ops, wops) || !reflect.DeepEqual(raw, wraw) || end != wend {
			t.Fatalf("patch(%q) = %+v, %q, %d\nwant %+v, %q, %d", data, ops, raw, end, wops, wraw, wend)
		}
		if !reflect.DeepEqual(got.Warnings(), want.Warnings()) {
			t.Fatalf("patch(%q) warnings = %v\nwant %v", data, got.Warnings(), want.Warnings())
		}
	})
}
