package history

import (
	"bytes"

	"github.com/threadcast/threadcast/internal/jsonscan"
)

// NextEvent cuts the next event out of a message body and returns it and the
// rest. A body is one JSON object, or several (JSONL, as the SDK batches
// them, or simply concatenated); objects may span lines, so a pretty-printed
// event from `nats pub` is one event, not a dozen broken ones. The scan
// tracks only strings and nesting, not JSON validity: the decoder judges each
// piece. Input that does not start with '{' is cut before the next line that
// does, so garbage costs one dead letter however many lines it has, and not
// the rest of the batch. ok is
// false when only whitespace remains. The returned slices alias data.
//
// Fast path: a line that starts with '{' and ends with '}', followed by
// nothing or by a line that starts with '{', is taken whole without
// scanning it. A JSON string holds no raw newline, and a '}' that ends a
// line inside an object is followed by ',', '}' or ']', never by '{', so
// such a line can only be a whole object, or invalid — which the decoder
// reports. This is every line the SDK sends; only multi-line
// (pretty-printed) objects are scanned, and a line followed by anything
// else: scanning every line costs a tenth of the shard's CPU.
func NextEvent(data []byte) (event, rest []byte, ok bool) {
	i := 0
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	if i == len(data) {
		return nil, nil, false
	}
	start := i
	if data[i] == '{' {
		end := len(data)
		if nl := bytes.IndexByte(data[i:], '\n'); nl >= 0 {
			end = i + nl
		}
		if line := trimRight(data[i:end]); line[len(line)-1] == '}' && startsEvent(data[end:]) {
			return line, data[end:], true
		}
	}
	if data[i] != '{' {
		// Lines up to the next one that starts an object are one piece:
		// an undecodable message of many lines is one dead letter, not
		// one per line, and an event after it is still its own.
		for {
			for i < len(data) && data[i] != '\n' {
				i++
			}
			j := i
			for j < len(data) && isSpace(data[j]) {
				j++
			}
			if j == len(data) || data[j] == '{' {
				break
			}
			i = j
		}
		return trimRight(data[start:i]), data[i:], true
	}
	if end := jsonscan.End(data, i); end >= 0 {
		return data[start:end], data[end:], true
	}
	// Unterminated: the rest is one (malformed) event.
	return trimRight(data[start:]), nil, true
}

// startsEvent reports whether rest, after whitespace, is empty or starts
// with '{'.
func startsEvent(rest []byte) bool {
	i := 0
	for i < len(rest) && isSpace(rest[i]) {
		i++
	}
	return i == len(rest) || rest[i] == '{'
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func trimRight(b []byte) []byte {
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
