package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzSanitize checks the claim batching rests on: in valid JSON, CR and LF
// can only be insignificant whitespace, so replacing them with spaces keeps
// the value identical and leaves one line.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		"{\n  \"type\": \"TEXT_MESSAGE_CONTENT\",\r\n  \"delta\": \"a\\nb\\r\"\n}",
		`{"type":"RAW","event":[1,{"a":"\n"}]}`,
		"[\r\n]", "\"\\r\\n\"", "{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		out := bytes.Clone(in)
		sanitize(out)
		if bytes.ContainsAny(out, "\r\n") {
			t.Fatalf("line break left in %q", out)
		}
		a, err := decodeNumbers(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := decodeNumbers(out)
		if err != nil {
			t.Fatalf("sanitize broke %q: %v", in, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("sanitize changed %q into %q", in, out)
		}
	})
}

// decodeNumbers decodes keeping numbers as text (1E700 is valid JSON).
func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
