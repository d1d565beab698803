package reducer

import (
	"testing"

	"github.com/threadcast/threadcast/jsondoc"
)

func TestDistinctNames(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{give: `{}`, want: true},
		{give: ` { } `, want: true},
		{give: `{"a":1}`, want: true},
		{give: `{"a":1,"b":null,"c":"x,}\"y","d":{"a":[1,{"b":2}]},"e":[],"f":true}`, want: true},
		{give: `{ "a" : 1 , "b" : [ 1 , 2 ] }`, want: true},
		{give: `{"a":1,"a":2}`, want: false},
		{give: `{"a":{"x":1},"b":2,"a":3}`, want: false},
		{give: `{"a\u0062":1,"ab":2}`, want: false}, // escaped name: unsure
		{give: `{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8}`, want: true},
		{give: `{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}`, want: false}, // too many to compare
		{give: `[1]`, want: false},
		{give: `"a"`, want: false},
		{give: `{"a":1`, want: false},
		{give: `{"a"`, want: false},
		{give: `{"a":"1`, want: false},
		{give: `{"a":[1}`, want: false},
		{give: `{"a":1 "b":2}`, want: false},
		{give: `{1:2}`, want: false},
		{give: ``, want: false},
	}
	for _, tt := range tests {
		if got := distinctNames([]byte(tt.give)); got != tt.want {
			t.Errorf("distinctNames(%s) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

// TestMergeMetaFirstMerge checks mergeMeta's Parse shortcut for an item
// without metadata against the general MergeShallow path: the same JSON,
// also after a second merge over it, and no change for a non-object.
func TestMergeMetaFirstMerge(t *testing.T) {
	gives := []string{
		`{}`,
		`{"a":1}`,
		` {"a" : [1, 2], "b":{"c":null}} `,
		`{"a":1,"a":2}`,
		`{"a":1,"b":2,"a":{"x":3}}`,
		`{"a\u0062":1,"ab":2}`,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"1":10}`,
		`{"k":"v\"}","z":-1.5e3}`,
	}
	second := []byte(`{"b":"second","new":true}`)
	for _, give := range gives {
		var got *jsondoc.Doc
		mergeMeta(&got, []byte(give))
		want := new(jsondoc.Doc)
		if err := want.MergeShallow([]byte(give)); err != nil {
			t.Fatalf("MergeShallow(%s): %v", give, err)
		}
		if g, w := string(got.AppendJSON(nil)), string(want.AppendJSON(nil)); g != w {
			t.Errorf("first merge of %s: got %s, want %s", give, g, w)
		}
		mergeMeta(&got, second)
		if err := want.MergeShallow(second); err != nil {
			t.Fatal(err)
		}
		if g, w := string(got.AppendJSON(nil)), string(want.AppendJSON(nil)); g != w {
			t.Errorf("second merge over %s: got %s, want %s", give, g, w)
		}
	}
	// Metadata comes from the codec, valid JSON by codec.Raw's contract,
	// which mergeMeta trusts (jsondoc's Decoded input): only valid
	// non-objects are in contract here. Invalid text is jsondoc.MergeShallow's
	// to reject, and its tests check that.
	for _, give := range []string{`[1]`, `"s"`, `null`} {
		var got *jsondoc.Doc
		mergeMeta(&got, []byte(give))
		if got != nil && got.Kind() != jsondoc.KindNull && got.Kind() != jsondoc.KindObject {
			t.Errorf("non-object %s became a %v", give, got.Kind())
		}
		if got != nil && got.Kind() == jsondoc.KindObject && got.Len() != 0 {
			t.Errorf("non-object %s merged members: %s", give, got.AppendJSON(nil))
		}
	}
}
