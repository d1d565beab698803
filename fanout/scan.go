package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// NOTE: a structural scanner for the pipeline's snapshot replies, which
// may be hundreds of megabytes (a long thread's view and its snapshot
// events). encoding/json spent most of a large join validating and
// skipping them byte by byte; this finds the members and array elements
// by structure alone — strings are skipped with bytes.IndexByte, so the
// text that makes up most of a view is passed over at memory speed — and
// returns views into the input. It checks nesting, string and member
// syntax, not the grammar of numbers and literals: the input is ingest's
// own encoding (codec and reducer output), not client input.

var errScan = errors.New("malformed JSON")

// scanObject calls fn with the name (raw, unquoted, escapes kept) and the
// value of each member of the object in b. The slices alias b.
func scanObject(b []byte, fn func(name, value []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("%w: not an object", errScan)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return fmt.Errorf("%w: member name expected at %d", errScan, i)
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		name := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("%w: ':' expected at %d", errScan, i)
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return err
		}
		if err := fn(name, b[i:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return trailing(b, i+1)
		default:
			return fmt.Errorf("%w: ',' or '}' expected at %d", errScan, i)
		}
	}
}

// scanArray returns the elements of the array in b, aliasing b.
func scanArray(b []byte) ([]json.RawMessage, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, fmt.Errorf("%w: not an array", errScan)
	}
	var out []json.RawMessage
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return out, trailing(b, i+1)
	}
	for {
		end, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, b[i:end:end])
		i = skipSpace(b, end)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return out, trailing(b, i+1)
		default:
			return nil, fmt.Errorf("%w: ',' or ']' expected at %d", errScan, i)
		}
	}
}

// skipValue returns the end of the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: value expected at %d", errScan, i)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipContainer(b, i)
	case ',', ':', '}', ']':
		return 0, fmt.Errorf("%w: value expected at %d", errScan, i)
	}
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	return j, nil
}

// skipContainer returns the end of the object or array at b[i], checking
// that brackets match.
func skipContainer(b []byte, i int) (int, error) {
	var stack [32]byte
	open := stack[:0]
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			end, err := skipString(b, i)
			if err != nil {
				return 0, err
			}
			i = end
			continue
		case '{':
			open = append(open, '}')
		case '[':
			open = append(open, ']')
		case '}', ']':
			if len(open) == 0 || open[len(open)-1] != c {
				return 0, fmt.Errorf("%w: unmatched %q at %d", errScan, c, i)
			}
			open = open[:len(open)-1]
			if len(open) == 0 {
				return i + 1, nil
			}
		}
		i++
	}
	return 0, fmt.Errorf("%w: unterminated container", errScan)
}

// skipString returns the end of the string starting at the quote b[i].
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, fmt.Errorf("%w: unterminated string at %d", errScan, i)
		}
		q := j + k
		n := 0 // backslashes before the quote: odd means it is escaped
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ':'
}

func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return fmt.Errorf("%w: data after the value at %d", errScan, i)
	}
	return nil
}
