package jsondoc

import (
	"errors"
	"testing"
)

// TestRFC6902AppendixA runs the examples of RFC 6902 Appendix A (A.13, an
// op object with two "op" members, is the decoder's concern and absent).
func TestRFC6902AppendixA(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		patch   string
		want    string
		wantErr error
	}{
		{"A.1 adding an object member", `{"foo":"bar"}`, `[{"op":"add","path":"/baz","value":"qux"}]`, `{"baz":"qux","foo":"bar"}`, nil},
		{"A.2 adding an array element", `{"foo":["bar","baz"]}`, `[{"op":"add","path":"/foo/1","value":"qux"}]`, `{"foo":["bar","qux","baz"]}`, nil},
		{"A.3 removing an object member", `{"baz":"qux","foo":"bar"}`, `[{"op":"remove","path":"/baz"}]`, `{"foo":"bar"}`, nil},
		{"A.4 removing an array element", `{"foo":["bar","qux","baz"]}`, `[{"op":"remove","path":"/foo/1"}]`, `{"foo":["bar","baz"]}`, nil},
		{"A.5 replacing a value", `{"baz":"qux","foo":"bar"}`, `[{"op":"replace","path":"/baz","value":"boo"}]`, `{"baz":"boo","foo":"bar"}`, nil},
		{"A.6 moving a value", `{"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}`, `[{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]`, `{"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}`, nil},
		{"A.7 moving an array element", `{"foo":["all","grass","cows","eat"]}`, `[{"op":"move","from":"/foo/1","path":"/foo/3"}]`, `{"foo":["all","cows","eat","grass"]}`, nil},
		{"A.8 testing a value: success", `{"baz":"qux","foo":["a",2,"c"]}`, `[{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]`, `{"baz":"qux","foo":["a",2,"c"]}`, nil},
		{"A.9 testing a value: error", `{"baz":"qux"}`, `[{"op":"test","path":"/baz","value":"bar"}]`, ``, ErrTestFailed},
		{"A.10 adding a nested member object", `{"foo":"bar"}`, `[{"op":"add","path":"/child","value":{"grandchild":{}}}]`, `{"foo":"bar","child":{"grandchild":{}}}`, nil},
		{"A.11 ignoring unrecognized elements", `{"foo":"bar"}`, `[{"op":"add","path":"/baz","value":"qux","xyz":123}]`, `{"foo":"bar","baz":"qux"}`, nil},
		{"A.12 adding to a nonexistent target", `{"foo":"bar"}`, `[{"op":"add","path":"/baz/bat","value":"qux"}]`, ``, ErrNotFound},
		{"A.14 ~ escape ordering", `{"/":9,"~1":10}`, `[{"op":"test","path":"/~01","value":10}]`, `{"/":9,"~1":10}`, nil},
		{"A.15 comparing strings and numbers", `{"/":9,"~1":10}`, `[{"op":"test","path":"/~01","value":"10"}]`, ``, ErrTestFailed},
		{"A.16 adding an array value", `{"foo":["bar"]}`, `[{"op":"add","path":"/foo/-","value":["abc","def"]}]`, `{"foo":["bar",["abc","def"]]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.give)
			err := d.Apply(mustPatch(t, tt.patch))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Apply error = %v, want %v", err, tt.wantErr)
				}
				assertJSON(t, d, tt.give)
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			assertJSON(t, d, tt.want)
		})
	}
}

// TestCommunitySuiteBehaviours covers the behaviours of the community
// suite github.com/json-patch/json-patch-tests (tests.json) that the other
// tables do not already pin. The suite itself is not vendored: its
// licence could not be confirmed from here. Cases were re-written, not
// copied; malformed-patch cases (missing value/from, unknown op) are the
// codec's and are absent.
func TestCommunitySuiteBehaviours(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		patch   string
		want    string
		wantErr error
	}{
		{"deep empty-name target", `{"foo":{}}`, `[{"op":"add","path":"/foo/","value":1}]`, `{"foo":{"":1}}`, nil},
		{"add to empty top-level array", `[]`, `[{"op":"add","path":"/0","value":"foo"}]`, `["foo"]`, nil},
		{"object to array at root", `{}`, `[{"op":"add","path":"","value":[]}]`, `[]`, nil},
		{"array to object at root", `[]`, `[{"op":"add","path":"","value":{}}]`, `{}`, nil},
		{"scalar root replaced", `"foo"`, `[{"op":"replace","path":"","value":"bar"}]`, `"bar"`, nil},
		{"exponent-looking name on object", `{"1e0":"foo"}`, `[{"op":"test","path":"/1e0","value":"foo"}]`, `{"1e0":"foo"}`, nil},
		{"exponent index on array fails", `["foo","bar"]`, `[{"op":"test","path":"/1e0","value":"bar"}]`, ``, ErrBadIndex},
		{"double-zero index fails", `["foo","bar"]`, `[{"op":"test","path":"/00","value":"foo"}]`, ``, ErrBadIndex},
		{"object name on array fails", `["foo","sil"]`, `[{"op":"add","path":"/bar","value":42}]`, ``, ErrBadIndex},
		{"array value inserted, not flattened", `["foo","sil"]`, `[{"op":"add","path":"/1","value":["bar","baz"]}]`, `["foo",["bar","baz"],"sil"]`, nil},
		{"remove nested member", `{"foo":1,"baz":[{"qux":"hello"}]}`, `[{"op":"remove","path":"/baz/0/qux"}]`, `{"foo":1,"baz":[{}]}`, nil},
		{"repeated removes shift indices", `[1,2,3,4]`, `[{"op":"remove","path":"/1"},{"op":"remove","path":"/2"}]`, `[1,3]`, nil},
		{"replace with missing parent fails", `{"bar":"baz"}`, `[{"op":"replace","path":"/foo/bar","value":false}]`, ``, ErrNotFound},
		{"null member is testable", `{"foo":null}`, `[{"op":"test","path":"/foo","value":null}]`, `{"foo":null}`, nil},
		{"null member moves", `{"foo":null}`, `[{"op":"move","from":"/foo","path":"/bar"}]`, `{"bar":null}`, nil},
		{"nested unordered test", `{"foo":[{"foo":1,"bar":2}]}`, `[{"op":"test","path":"/foo","value":[{"bar":2,"foo":1}]}]`, `{"foo":[{"foo":1,"bar":2}]}`, nil},
		{"test kind mismatch fails", `{"foo":{"bar":[1,2,5,4]}}`, `[{"op":"test","path":"/foo","value":[1,2]}]`, ``, ErrTestFailed},
		{"odd member names", `{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8}`,
			`[{"op":"test","path":"/foo/0","value":"bar"},{"op":"test","path":"/","value":0},{"op":"test","path":"/a~1b","value":1},{"op":"test","path":"/c%d","value":2},{"op":"test","path":"/e^f","value":3},{"op":"test","path":"/g|h","value":4},{"op":"test","path":"/i\\j","value":5},{"op":"test","path":"/k\"l","value":6},{"op":"test","path":"/ ","value":7},{"op":"test","path":"/m~0n","value":8}]`,
			`{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8}`, nil},
		{"move member into array", `{"baz":[{"qux":"hello"}],"bar":1}`, `[{"op":"move","from":"/baz/0/qux","path":"/baz/1"}]`, `{"baz":[{},"hello"],"bar":1}`, nil},
		{"append n levels down", `[1,2,[3,[4,5]]]`, `[{"op":"add","path":"/2/1/-","value":{"foo":["bar","baz"]}}]`, `[1,2,[3,[4,5,{"foo":["bar","baz"]}]]]`, nil},
		{"bad index in from fails", `{"foo":1,"baz":[1,2,3,4]}`, `[{"op":"move","from":"/baz/1e0","path":"/foo"}]`, ``, ErrBadIndex},
		{"names are case-sensitive", `{"foo":"bar"}`, `[{"op":"add","path":"/FOO","value":"BAR"}]`, `{"foo":"bar","FOO":"BAR"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.give)
			before := string(d.AppendJSON(nil))
			err := d.Apply(mustPatch(t, tt.patch))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Apply error = %v, want %v", err, tt.wantErr)
				}
				if after := string(d.AppendJSON(nil)); after != before {
					t.Fatalf("failed patch changed the document: %s -> %s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			assertJSON(t, d, tt.want)
		})
	}
}
