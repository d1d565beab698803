package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// streamTrace reads data to the end and describes every event and the
// error that ends it, for comparing reads of different sizes.
func streamTrace(r io.Reader, max int) string {
	sr := NewStreamReader(r)
	sr.SetMaxEventSize(max)
	var out bytes.Buffer
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return out.String() + "EOF"
		}
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				fmt.Fprintf(&out, "err %d @%d line %d: %s", e.Kind, e.Offset, e.Line, e.Detail)
			} else {
				fmt.Fprintf(&out, "err %v", err)
			}
			return out.String()
		}
		fmt.Fprintf(&out, "ev %q; ", ev)
	}
}

// TestStreamReaderValueEnds pins where the JSONL and array readers cut
// values: escapes, scalars, closing brackets the value did not open,
// unterminated values and the size bound, whole and one byte per read.
func TestStreamReaderValueEnds(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"{\"a\":\"b\\\\\"}\n{\"c\":\"\\\"}\"}", 0, "ev \"{\\\"a\\\":\\\"b\\\\\\\\\\\"}\"; ev \"{\\\"c\\\":\\\"\\\\\\\"}\\\"}\"; EOF"},
		{"{\"a\":1}}", 0, "ev \"{\\\"a\\\":1}\"; err 14 @7 line 1: expected '{' starting the next event (JSONL)"},
		{"{\"a\":", 0, "err 16 @0 line 1: stream ends inside a JSON value"},
		{"{\"a\":\"\\", 0, "err 16 @0 line 1: stream ends inside a JSON value"},
		{"{\"a\":{\"b\":[1,2]}}{\"c\":3}", 0, "ev \"{\\\"a\\\":{\\\"b\\\":[1,2]}}\"; ev \"{\\\"c\\\":3}\"; EOF"},
		{"[1]", 0, "err 14 @2 line 1: unbalanced ']'"},
		{"[1,2]", 0, "ev \"1\"; err 14 @4 line 1: unbalanced ']'"},
		{"[}", 0, "err 14 @1 line 1: unbalanced '}'"},
		{"[1 ,2]", 0, "ev \"1\"; err 14 @5 line 1: unbalanced ']'"},
		{"[ \"a\\\"b\" , {\"x\":\"]\"} ]", 0, "ev \"\\\"a\\\\\\\"b\\\"\"; ev \"{\\\"x\\\":\\\"]\\\"}\"; EOF"},
		{"[\"abc", 0, "err 16 @1 line 1: stream ends inside a JSON value"},
		{"[\"abc\\", 0, "err 16 @1 line 1: stream ends inside a JSON value"},
		{"[tru\"e,\"]", 0, "ev \"tru\\\"e,\\\"\"; EOF"},
		{"[1{\"a\":2}3]", 0, "ev \"1{\\\"a\\\":2}\"; err 14 @9 line 1: expected ',' or ']' after an array element"},
		{"[{\"a\":[1,2]]", 0, "ev \"{\\\"a\\\":[1,2]]\"; err 16 @12 line 1: stream ends inside the JSON array (missing ']')"},
		{"[{\"a\":1},{\"b\":2}", 0, "ev \"{\\\"a\\\":1}\"; ev \"{\\\"b\\\":2}\"; err 16 @16 line 1: stream ends inside the JSON array (missing ']')"},
		{"[{\"a\":1},", 0, "ev \"{\\\"a\\\":1}\"; err 16 @9 line 1: stream ends inside the JSON array (missing ']')"},
		{"[1", 0, "ev \"1\"; err 16 @2 line 1: stream ends inside the JSON array (missing ']')"},
		{"[nul", 0, "ev \"nul\"; err 16 @4 line 1: stream ends inside the JSON array (missing ']')"},
		{"[{\"a\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}]", 0, "ev \"{\\\"a\\\":\\\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\\"}\"; EOF"},
		{"[{\"a\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}]", 32, "err 13 @1 line 1: event larger than 32 bytes (SetMaxEventSize)"},
		{"{\"a\":\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"}\n{}", 40, "err 13 @0 line 1: event larger than 40 bytes (SetMaxEventSize)"},
	} {
		max := c.max
		if max == 0 {
			max = DefaultMaxEventSize
		}
		whole := streamTrace(bytes.NewReader([]byte(c.in)), max)
		one := streamTrace(iotest.OneByteReader(bytes.NewReader([]byte(c.in))), max)
		if whole != c.want || one != c.want {
			t.Errorf("%q:\n whole %s\n bytes %s\n want  %s", c.in, whole, one, c.want)
		}
	}
}

// FuzzStreamReaderReadSizes: how JSONL or array input is split into
// reads changes nothing the reader returns, so the value scanner resumes
// exactly. (SSE lines are bounded per read and are left out.)
func FuzzStreamReaderReadSizes(f *testing.F) {
	f.Add([]byte(`[{"a":"b\\"},1,"x\"y"]`))
	f.Add([]byte(`{"a":{"b":[1,2]}}` + "\n" + `{"c":"\u00e9"}`))
	f.Add([]byte(`[tru"e,"]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if lead := bytes.TrimLeft(data, " \t\r\n"); len(lead) == 0 || (lead[0] != '{' && lead[0] != '[') {
			return
		}
		whole := streamTrace(bytes.NewReader(data), DefaultMaxEventSize)
		if one := streamTrace(iotest.OneByteReader(bytes.NewReader(data)), DefaultMaxEventSize); one != whole {
			t.Fatalf("%q:\n whole %s\n bytes %s", data, whole, one)
		}
		if half := streamTrace(iotestHalf(data), DefaultMaxEventSize); half != whole {
			t.Fatalf("%q:\n whole %s\n 7s    %s", data, whole, half)
		}
	})
}
