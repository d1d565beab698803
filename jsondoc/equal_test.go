package jsondoc

import (
	"errors"
	"testing"
)

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`100`, `1E2`, true},
		{`100`, `1e+2`, true},
		{`0.1`, `1e-1`, true},
		{`10e-1`, `1`, true},
		{`0`, `-0`, true},
		{`0.0`, `0e10`, true},
		{`-1`, `1`, false},
		{`1`, `1.0000000000000000001`, false},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`1`, `"1"`, false},
		{`"a"`, `"\u0061"`, true},
		{`"\/"`, `"/"`, true},
		{`"a"`, `"b"`, false},
		{`"a\n"`, `"a\\n"`, false},
		{`null`, `null`, true},
		{`null`, `false`, false},
		{`true`, `true`, true},
		{`true`, `false`, false},
		{`[]`, `[ ]`, true},
		{`[1,2]`, `[2,1]`, false},
		{`[1,2]`, `[1,2,3]`, false},
		{`[1,[2,{"a":1}]]`, ` [ 1.0 , [ 2 , { "a" : 1e0 } ] ] `, true},
		{`{}`, `{ }`, true},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`{"a":1}`, `{"b":1}`, false},
		{`{"a":1,"a":2}`, `{"a":2}`, true},
		{`{"a":1,"a":2}`, `{"a":1}`, false},
		{`{"\u00e9":1}`, `{"é":1}`, true},
		// Lone surrogates are code units, as in JavaScript: distinct ones
		// differ, and none is U+FFFD.
		{`"\ud800"`, `"\uD800"`, true},
		{`"\ud800"`, `"\udfff"`, false},
		{`"\ud800"`, `"\ufffd"`, false},
		{`{"\ud800":1}`, `{"\udbff":1}`, false},
		{`"\ud83d\ude00"`, `"😀"`, true},
		{`{"a":[]}`, `{"a":{}}`, false},
	}
	for _, tt := range tests {
		got, err := Equal([]byte(tt.a), []byte(tt.b))
		if err != nil {
			t.Errorf("Equal(%s, %s): %v", tt.a, tt.b, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Equal(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if back, _ := Equal([]byte(tt.b), []byte(tt.a)); back != got {
			t.Errorf("Equal not symmetric on %s, %s", tt.a, tt.b)
		}
	}
}

func TestEqualInvalid(t *testing.T) {
	for _, tt := range []struct{ a, b string }{{`{`, `{}`}, {`{}`, `[1,]`}, {``, `1`}, {`"\x"`, `"x"`}, {"\"\x01\"", `""`}, {`"\u12"`, `""`}} {
		if _, err := Equal([]byte(tt.a), []byte(tt.b)); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Equal(%q, %q) error = %v, want ErrInvalidJSON", tt.a, tt.b, err)
		}
	}
}
