package jsonscan

import (
	"strings"
	"testing"
)

// refEnd is End written the plain way, one byte at a time, as the
// reference the tests compare against.
func refEnd(b []byte, i int) int {
	depth := 0
	inStr, esc := false, false
	for ; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 0 {
					return i + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	if inStr || depth > 0 {
		return -1
	}
	return i
}

var endCases = []struct {
	in   string
	i    int
	want int
}{
	{``, 0, 0},
	{`{}`, 2, 2},
	{`{}`, 0, 2},
	{`[]`, 0, 2},
	{`{"a":1}x`, 0, 7},
	{`{"a":[1,{"b":"}"}]}`, 0, 19},
	{`{"a":"\"}"}`, 0, 11},
	{`{"a":"\\"}`, 0, 10},
	{`{]`, 0, 2}, // nesting is counted, not matched
	{`"abc"`, 0, 5},
	{`"a\"bc",`, 0, 7},
	{`"a\\"bc"`, 0, 5},
	{`"abc`, 0, -1},
	{`"abc\`, 0, -1},
	{`"abc\"`, 0, -1},
	{`{"a":1`, 0, -1},
	{`{"a":"}`, 0, -1},
	{`[[[[[[[[[[]]]]]]]]]`, 0, -1},
	{`[[[[[[[[[[]]]]]]]]]]`, 0, 20},
	{`123`, 0, 3},
	{`123,4`, 0, 3},
	{`true}`, 0, 4},
	{`null]`, 0, 4},
	{`1.5e3 `, 0, 5},
	{"1\n", 0, 1},
	{"1\t", 0, 1},
	{"1\r", 0, 1},
	{`,`, 0, 0},
	{`}`, 0, 0},
	{`]`, 0, 0},
	{` 1`, 0, 0},
	{`tru"e,"x`, 0, 7}, // a string inside a scalar ends the value
	{`1{"a":2}3`, 0, 8},
	{`1{`, 0, -1},
	{`ab"c`, 0, -1},
	{`{"a":1,"b":2}`, 5, 6},
	{`{"a":1,"b":[1,2]}`, 11, 16},
	{`{"a":1,"b":2}`, 11, 12},
	{`{"long":"` + strings.Repeat("x", 40) + `\"` + strings.Repeat("y", 9) + `"}`, 0, 62},
	{`[` + strings.Repeat(`{"k":"v","n":[1,2,3]},`, 5) + `0]`, 0, 113},
}

func TestEnd(t *testing.T) {
	for _, c := range endCases {
		if got := End([]byte(c.in), c.i); got != c.want {
			t.Errorf("End(%q, %d) = %d, want %d", c.in, c.i, got, c.want)
		}
		if got := refEnd([]byte(c.in), c.i); got != c.want {
			t.Errorf("refEnd(%q, %d) = %d, want %d (the table or the reference is wrong)", c.in, c.i, got, c.want)
		}
		for _, step := range []int{1, 2, 3, 7, 8, 9} {
			if got := scanPieces([]byte(c.in), c.i, step); got != c.want {
				t.Errorf("Scanner in pieces of %d over %q from %d = %d, want %d", step, c.in, c.i, got, c.want)
			}
		}
	}
}

// scanPieces runs a Scanner over b[i:] fed step bytes at a time and
// returns what End would: the absolute end, or -1.
func scanPieces(b []byte, i, step int) int {
	v := b[i:]
	var s Scanner
	pos, n := 0, 0
	for {
		n += step
		if n > len(v) {
			n = len(v)
		}
		end, st := s.Scan(v[:n], pos)
		switch st {
		case Done, Closer:
			return i + end
		}
		if end < n {
			panic("Scan stopped before the end of its input with More")
		}
		pos = end
		if n == len(v) {
			if s.Complete() {
				return i + n
			}
			return -1
		}
	}
}

// TestScannerStatus checks what only the Scanner tells apart: a scalar
// that a closing bracket ends, and a value that ends by itself.
func TestScannerStatus(t *testing.T) {
	for _, c := range []struct {
		in   string
		end  int
		want Status
	}{
		{`}`, 0, Closer},
		{`1]`, 1, Closer},
		{`{}]`, 2, Done},
		{`"x"]`, 3, Done},
		{`1,`, 1, Done},
		{`12`, 2, More},
		{`{"a"`, 4, More},
		{`"a\`, 4, More}, // resumes past the escaped byte still to come
	} {
		var s Scanner
		if end, st := s.Scan([]byte(c.in), 0); end != c.end || st != c.want {
			t.Errorf("Scan(%q) = %d, %d; want %d, %d", c.in, end, st, c.end, c.want)
		}
	}
}

func FuzzEnd(f *testing.F) {
	for _, c := range endCases {
		f.Add([]byte(c.in), uint8(c.i), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, at, step uint8) {
		i := int(at)
		if i > len(b) {
			i = len(b)
		}
		want := refEnd(b, i)
		if got := End(b, i); got != want {
			t.Fatalf("End(%q, %d) = %d, reference %d", b, i, got, want)
		}
		if got := scanPieces(b, i, int(step)%17+1); got != want {
			t.Fatalf("Scanner in pieces of %d over %q from %d = %d, reference %d", int(step)%17+1, b, i, got, want)
		}
	})
}

func BenchmarkEnd(b *testing.B) {
	doc := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"` +
		strings.Repeat(`some text with \"quotes\" and {braces} `, 8) + `","n":[1,2,{"k":null}]}`)
	b.SetBytes(int64(len(doc)))
	for i := 0; i < b.N; i++ {
		if End(doc, 0) != len(doc) {
			b.Fatal("wrong end")
		}
	}
}
