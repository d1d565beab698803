package jsondoc

import (
	"bytes"
	"encoding/json"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/threadcast/threadcast/codec"
)

// FuzzParse: any input either fails Parse or round-trips to the same
// value, and Parse accepts exactly what encoding/json accepts (below
// sonic's nesting limit, which fuzzing does not reach; TestParseDepth).
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2]`, ` {"a" : [ "x y" , 1e5 , null ] } `, `"\u00e9\""`, `{"a":1,"a":2}`, `[`, `01`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := Parse(raw)
		if (err == nil) != json.Valid(raw) {
			t.Fatalf("Parse err %v but json.Valid %v on %q", err, json.Valid(raw), raw)
		}
		if err != nil {
			return
		}
		out := d.AppendJSON(nil)
		// Valid input is in ParseDecoded's contract: same document.
		if dd, err := ParseDecoded(raw); err != nil || !bytes.Equal(dd.AppendJSON(nil), out) {
			t.Fatalf("ParseDecoded(%q) = %v, want %q like Parse", raw, err, out)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil || !bytes.Equal(out, compact.Bytes()) {
			t.Fatalf("Parse(%q) wrote %q, json.Compact %q (%v)", raw, out, compact.Bytes(), err)
		}
		want, got := decodeAny(t, raw), decodeAny(t, out)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("round trip changed the value: %q -> %q", raw, out)
		}
		if eq, err := Equal(raw, out); err != nil || !eq {
			t.Fatalf("Equal(input, output) = %v, %v", eq, err)
		}
		d.Len() // splits the top level
		if again := d.AppendJSON(nil); !bytes.Equal(again, out) && !hasDuplicateNames(raw) {
			t.Fatalf("splitting changed the output: %q -> %q", out, again)
		}
	})
}

func hasDuplicateNames(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			dup := false
			for dec.More() {
				k, _ := dec.Token()
				ks, _ := k.(string)
				if seen[ks] {
					dup = true
				}
				seen[ks] = true
				if walk() {
					dup = true
				}
			}
			dec.Token()
			return dup
		case json.Delim('['):
			dup := false
			for dec.More() {
				if walk() {
					dup = true
				}
			}
			dec.Token()
			return dup
		}
		return false
	}
	return walk()
}

// FuzzApply drives random patches, built from the fuzz input, against a
// document and checks them against a naive reference applier on
// encoding/json trees: the same verdict, the same resulting value, a
// byte-identical document after any failure, and never a panic.
func FuzzApply(f *testing.F) {
	f.Add(`{"a":{"b":[1,2,{"c":"x"}]},"d":[],"e~f/g":null}`, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add(`[1,[2,3],{"k":[4]}]`, []byte{3, 3, 3, 4, 4, 4, 5, 5, 5, 1, 1, 1})
	f.Add(`{"a":1,"a":{"x":2}}`, []byte{2, 7, 1, 9, 0, 0, 4, 4})
	f.Add(`"scalar"`, []byte{0, 1, 2})
	f.Add(`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":{"z":[]}}`, []byte{1, 40, 2, 33, 0, 17, 3, 9, 9, 5, 6, 7})
	f.Fuzz(func(t *testing.T, docText string, prog []byte) {
		d, err := Parse([]byte(docText))
		if err != nil || !utf8.ValidString(docText) || surrogateEscape.MatchString(docText) {
			// The reference decodes invalid UTF-8 names, and lone
			// surrogate escapes, to U+FFFD; Doc keeps the bytes and the
			// code units, as does the codec's decoding of the path.
			return
		}
		ref := decodeAny(t, []byte(docText))
		ops := genOps(ref, prog)
		before := d.AppendJSON(nil)
		wantDoc, wantOK := refApply(ref, ops)
		// ApplyDecoded (values trusted, small ones held inline) must do
		// exactly what Apply does: same verdict, same bytes.
		dd, _ := Parse([]byte(docText))
		errDecoded := dd.ApplyDecoded(ops)
		err = d.Apply(ops)
		after := d.AppendJSON(nil)
		if (err == nil) != (errDecoded == nil) || !bytes.Equal(after, dd.AppendJSON(nil)) {
			t.Fatalf("Apply(%s) on %s: Apply gave %s (%v), ApplyDecoded %s (%v)", opsString(ops), before, after, err, dd.AppendJSON(nil), errDecoded)
		}
		if !json.Valid(after) {
			t.Fatalf("invalid output %q", after)
		}
		if n := d.TextLen(); n != len(after) {
			t.Fatalf("after Apply(%s) on %s: TextLen %d, text %s of %d bytes", opsString(ops), before, n, after, len(after))
		}
		if (err == nil) != wantOK {
			t.Fatalf("Apply(%s) on %s: err %v, reference ok %v", opsString(ops), before, err, wantOK)
		}
		if err != nil {
			if !bytes.Equal(before, after) {
				t.Fatalf("failed patch %s changed %s to %s", opsString(ops), before, after)
			}
			return
		}
		if got := decodeAny(t, after); !refEqual(got, wantDoc) {
			t.Fatalf("Apply(%s) on %s = %s, reference %v", opsString(ops), before, after, wantDoc)
		}
		// Values were copied once on the way in: poisoning the caller's
		// buffers (STYLE practice 5) must not show in the document.
		for i := range ops {
			ops[i].Value = bytes.Repeat([]byte("#"), len(ops[i].Value))
		}
		if again := d.AppendJSON(nil); !bytes.Equal(again, after) {
			t.Fatalf("document changed when op buffers were reused: %s -> %s", after, again)
		}
	})
}

func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return v
}

func opsString(ops []codec.PatchOp) string {
	var b strings.Builder
	for _, op := range ops {
		b.WriteString(OpName(op.Op) + " " + strconv.Quote(op.From) + "->" + strconv.Quote(op.Path) + " " + string(op.Value) + "; ")
	}
	return b.String()
}

var fuzzValues = []string{`1`, `1.0`, `"s"`, `{"a":[1,{"b":null}]}`, `[]`, `{}`, `null`, `true`, `"~/"`, `[1,2]`, `-0`, `1e2`,
	` [ 1 , "two" ] `, `{ "long name" : [ 1, 2, 3 ], "z" : "a value" }`}

// genOps builds up to 6 ops from prog, aiming paths at pointers that exist
// in doc and at their near misses.
func genOps(doc any, prog []byte) []codec.PatchOp {
	var ptrs []string
	var collect func(v any, p string)
	collect = func(v any, p string) {
		ptrs = append(ptrs, p)
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				collect(c, p+"/"+Escape(k))
			}
		case []any:
			for i, c := range x {
				collect(c, p+"/"+strconv.Itoa(i))
			}
		}
	}
	collect(doc, "")
	// map iteration order is random: sort for a reproducible program
	sortStrings(ptrs)
	suffixes := []string{"", "", "", "/-", "/new", "/0", "/01", "/9", "/", "/~1x", "/~0"}
	next := func() int {
		if len(prog) == 0 {
			return 0
		}
		b := int(prog[0])
		prog = prog[1:]
		return b
	}
	path := func() string { return ptrs[next()%len(ptrs)] + suffixes[next()%len(suffixes)] }
	var ops []codec.PatchOp
	for len(prog) > 0 && len(ops) < 6 {
		op := codec.PatchOp{Op: codec.OpKind(next()%6 + 1)}
		op.Path = path()
		switch op.Op {
		case codec.OpAdd, codec.OpReplace, codec.OpTest:
			op.Value = codec.Raw(fuzzValues[next()%len(fuzzValues)])
		case codec.OpMove, codec.OpCopy:
			op.From = path()
		}
		ops = append(ops, op)
	}
	return ops
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// The reference applier: RFC 6902 on encoding/json trees, rebuilt
// functionally, written for obviousness rather than speed.

func refApply(doc any, ops []codec.PatchOp) (any, bool) {
	doc = refCopy(doc)
	for _, op := range ops {
		var ok bool
		var value any
		if op.Value != nil {
			dec := json.NewDecoder(bytes.NewReader(op.Value))
			dec.UseNumber()
			if dec.Decode(&value) != nil {
				return nil, false
			}
		}
		path := refTokens(op.Path)
		switch op.Op {
		case codec.OpAdd:
			doc, ok = refSet(doc, path, value, true)
		case codec.OpReplace:
			doc, ok = refSet(doc, path, value, false)
		case codec.OpRemove:
			doc, ok = refRemove(doc, path)
		case codec.OpTest:
			var got any
			got, ok = refGet(doc, path)
			ok = ok && refEqual(got, value)
		case codec.OpCopy:
			var v any
			if v, ok = refGet(doc, refTokens(op.From)); ok {
				doc, ok = refSet(doc, path, refCopy(v), true)
			}
		case codec.OpMove:
			var v any
			from := refTokens(op.From)
			if v, ok = refGet(doc, from); !ok || op.From == op.Path {
				break
			}
			if strings.HasPrefix(op.Path, op.From+"/") {
				ok = false
				break
			}
			if doc, ok = refRemove(doc, from); ok {
				doc, ok = refSet(doc, path, v, true)
			}
		}
		if !ok {
			return nil, false
		}
	}
	return doc, true
}

func refTokens(p string) []string {
	if p == "" {
		return nil
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

var refIndexRE = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

func refIndex(tok string, n int, dash bool) (int, bool) {
	if tok == "-" && dash {
		return n, true
	}
	if !refIndexRE.MatchString(tok) || len(tok) > 9 {
		return 0, false
	}
	i, _ := strconv.Atoi(tok)
	if i > n || (!dash && i == n) {
		return 0, false
	}
	return i, true
}

func refGet(v any, toks []string) (any, bool) {
	for _, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			c, ok := x[t]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i, ok := refIndex(t, len(x), false)
			if !ok {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// refSet adds (insert) or replaces at toks and returns the new tree.
func refSet(v any, toks []string, val any, insert bool) (any, bool) {
	if len(toks) == 0 {
		return val, true
	}
	t := toks[0]
	switch x := v.(type) {
	case map[string]any:
		if len(toks) == 1 {
			if _, ok := x[t]; !ok && !insert {
				return nil, false
			}
			x[t] = val
			return x, true
		}
		c, ok := x[t]
		if !ok {
			return nil, false
		}
		nc, ok := refSet(c, toks[1:], val, insert)
		x[t] = nc
		return x, ok
	case []any:
		if len(toks) == 1 {
			i, ok := refIndex(t, len(x), insert)
			if !ok {
				return nil, false
			}
			if !insert {
				x[i] = val
				return x, true
			}
			return append(x[:i], append([]any{val}, x[i:]...)...), true
		}
		i, ok := refIndex(t, len(x), false)
		if !ok {
			return nil, false
		}
		nc, ok := refSet(x[i], toks[1:], val, insert)
		x[i] = nc
		return x, ok
	}
	return nil, false
}

func refRemove(v any, toks []string) (any, bool) {
	if len(toks) == 0 {
		return nil, true // remove at root yields null
	}
	t := toks[0]
	switch x := v.(type) {
	case map[string]any:
		c, ok := x[t]
		if !ok {
			return nil, false
		}
		if len(toks) == 1 {
			delete(x, t)
			return x, true
		}
		nc, ok := refRemove(c, toks[1:])
		x[t] = nc
		return x, ok
	case []any:
		i, ok := refIndex(t, len(x), false)
		if !ok {
			return nil, false
		}
		if len(toks) == 1 {
			return append(x[:i:i], x[i+1:]...), true
		}
		nc, ok := refRemove(x[i], toks[1:])
		x[i] = nc
		return x, ok
	}
	return nil, false
}

func refCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, c := range x {
			m[k] = refCopy(c)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, c := range x {
			s[i] = refCopy(c)
		}
		return s
	}
	return v
}

// refEqual is deep equality with numbers compared as exact rationals.
func refEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, c := range x {
			d, ok := y[k]
			if !ok || !refEqual(c, d) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !refEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// FuzzMergeShallow: merging any two documents either fails and leaves the
// target byte-identical, or equals a map merge of the two (null target
// treated as {}), per name, last write wins, no recursion. A split target
// (merged by splitting both sides) and an unsplit one (merged as text when
// small), through MergeShallow and, for valid sources, MergeShallowDecoded,
// must all write the same bytes.
func FuzzMergeShallow(f *testing.F) {
	f.Add(`{"a":1,"b":{"x":1}}`, `{"b":{"y":2},"c":null}`)
	f.Add(`null`, `{"a":1,"a":2}`)
	f.Add(`[1]`, `{"a":1}`)
	f.Add(`{"a":1}`, `"s"`)
	f.Add(`{"a":1,"b":2,"a":3}`, `{"\u0062":4,"c":5}`)
	f.Fuzz(func(t *testing.T, target, src string) {
		d, err := Parse([]byte(target))
		if err != nil || !utf8.ValidString(target) || !utf8.ValidString(src) || surrogateEscape.MatchString(target+src) {
			return // see FuzzApply and surrogateEscape
		}
		d.Len() // split first, so the failure path sees a split root too
		before := d.AppendJSON(nil)
		err = d.MergeShallow([]byte(src))
		after := d.AppendJSON(nil)
		if n := d.TextLen(); n != len(after) {
			t.Fatalf("after MergeShallow(%s into %s): TextLen %d, text %s of %d bytes", src, target, n, after, len(after))
		}
		merges := []func(*Doc) error{func(u *Doc) error { return u.MergeShallow([]byte(src)) }}
		if json.Valid([]byte(src)) {
			merges = append(merges, func(u *Doc) error { return u.MergeShallowDecoded(codec.Raw(src)) })
		}
		for _, merge := range merges {
			u, _ := Parse([]byte(target))
			uerr := merge(u)
			if got := u.AppendJSON(nil); (uerr == nil) != (err == nil) || !bytes.Equal(got, after) {
				t.Fatalf("MergeShallow(%s into unsplit %s) = %v, %s; split target gave %v, %s", src, target, uerr, got, err, after)
			}
		}
		tv := decodeAny(t, []byte(target))
		if tv == nil {
			tv = map[string]any{}
		}
		tm, tok := tv.(map[string]any)
		var sm map[string]any
		sok := json.Valid([]byte(src))
		if sok {
			sm, sok = decodeAny(t, []byte(src)).(map[string]any)
		}
		if !tok || !sok {
			if err == nil || !bytes.Equal(before, after) {
				t.Fatalf("MergeShallow(%s into %s) = %v, %s; want error, unchanged", src, target, err, after)
			}
			return
		}
		if err != nil {
			t.Fatalf("MergeShallow(%s into %s): %v", src, target, err)
		}
		for k, v := range sm {
			tm[k] = v
		}
		if got := decodeAny(t, after); !refEqual(got, tm) {
			t.Fatalf("MergeShallow(%s into %s) = %s, want %v", src, target, after, tm)
		}
	})
}

// hugeExponent matches number exponents big.Rat would take long to expand.
var hugeExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)

// surrogateEscape matches a \u escape of a UTF-16 surrogate. encoding/json
// decodes a lone one to U+FFFD, where Equal (like JavaScript) compares it
// as the code unit it is, so the reference below cannot judge such input;
// TestEqual pins those cases.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// FuzzEqual checks Equal against deep equality of encoding/json trees with
// numbers compared as exact rationals.
func FuzzEqual(f *testing.F) {
	f.Add(`{"a":[1,2.0,"x"]}`, `{"a":[1.0,2,"x"]}`)
	f.Add(`1e2`, `100`)
	f.Add(`{"a":1,"a":2}`, `{"a":2}`)
	f.Add(`"\u00e9"`, `"é"`)
	f.Add(`[0]`, `[-0.0]`)
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := Equal([]byte(a), []byte(b))
		valid := json.Valid([]byte(a)) && json.Valid([]byte(b))
		if (err == nil) != valid {
			// Only sonic's nesting limit (4096) may make Equal stricter;
			// bracket count bounds the depth from above.
			if err != nil && strings.Count(a+b, "[")+strings.Count(a+b, "{") > 4096 {
				return
			}
			t.Fatalf("Equal(%q, %q) err %v, json.Valid %v", a, b, err, valid)
		}
		if err != nil || !utf8.ValidString(a) || !utf8.ValidString(b) || hugeExponent.MatchString(a+b) || surrogateEscape.MatchString(a+b) {
			return
		}
		if want := refEqual(decodeAny(t, []byte(a)), decodeAny(t, []byte(b))); got != want {
			t.Fatalf("Equal(%s, %s) = %v, reference %v", a, b, got, want)
		}
	})
}
