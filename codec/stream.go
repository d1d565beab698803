package codec

// NOTE: structure of this file. StreamReader keeps one growing read buffer
// with a window [start, end) of unconsumed bytes. The framing is detected
// from the first non-blank byte: '{' = JSON values one after another (JSONL,
// or pretty-printed objects), '[' = one JSON array of events, anything else =
// SSE. In the JSON modes a small resumable scanner finds where the current
// value ends (strings and nesting only; Decode validates the rest); in SSE
// mode lines are parsed per the HTML event-stream rules.

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/threadcast/threadcast/internal/jsonscan"
)

// DefaultMaxEventSize is the default bound on one event (JSON value, or the
// data of one SSE event) and on one SSE line.
const DefaultMaxEventSize = 8 << 20

// The read buffer starts at initialReadSize, so that a small body (one
// HTTP request's) costs little, and doubles while the input keeps filling
// it, up to fullReadSize for reading and beyond only as one event needs.
const (
	initialReadSize = 4 << 10
	fullReadSize    = 64 << 10
)

// StreamReader splits a byte stream into events. It is not safe for
// concurrent use.
type StreamReader struct {
	r     io.Reader
	buf   []byte
	start int   // first unconsumed byte
	end   int   // end of read data
	base  int64 // stream offset of buf[0]
	line  int   // 1-based line of buf[start]
	eof   bool
	rerr  error

	mode   byte // 0 undetected, 'j' JSON values, 'a' JSON array, 's' SSE
	arrSt  byte // array: 0 want element or ']', 1 want ',' or ']', 2 closed
	max    int
	ev     []byte    // SSE: data of the event being assembled
	evBufs [2][]byte // SSE: alternating assembly buffers, so that a held
	// event is poisoned (not overwritten by the next one) under tcpoison
	cur    int
	hasEv  bool   // SSE: a data line was seen since the last dispatch
	evLine int    // SSE: line of the first data line of the pending event
	evOff  int    // SSE: its byte offset
	last   []byte // what the previous Next returned (poisoned before reuse)
	err    error  // sticky
	events int
}

// NewStreamReader returns a reader of the events in r, auto-detecting JSONL
// (or any whitespace-separated JSON objects), a JSON array of events, and
// AG-UI's SSE framing (data: lines, several joined with "\n"; id:, retry:,
// event:, other fields and comment lines ignored). One event may be at most
// DefaultMaxEventSize bytes; see SetMaxEventSize.
func NewStreamReader(r io.Reader) *StreamReader {
	return &StreamReader{r: r, line: 1, max: DefaultMaxEventSize}
}

// SetMaxEventSize sets the largest event (and SSE line) accepted, in bytes.
// Larger input makes Next fail with Kind KindTooLarge.
func (s *StreamReader) SetMaxEventSize(n int) {
	if n > 0 {
		s.max = n
	}
}

// Format reports the detected framing: "jsonl", "array", "sse", or "" before
// the first Next.
func (s *StreamReader) Format() string {
	switch s.mode {
	case 'j':
		return "jsonl"
	case 'a':
		return "array"
	case 's':
		return "sse"
	}
	return ""
}

// Next returns the bytes of the next event. They are valid until the next
// call to Next (the reader reuses its buffers; under the tcpoison tag they
// are overwritten with '#'). At the end of the stream Next returns io.EOF;
// bad framing returns an *Error with Kind KindStream, KindTruncated (the
// input ends inside an event) or KindTooLarge naming
// the line and byte offset, and a read error is returned as is. Errors are
// sticky.
func (s *StreamReader) Next() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	poison(s.last)
	s.last = nil
	var ev []byte
	var err error
	if s.mode == 0 {
		err = s.detect()
	}
	if err == nil {
		switch s.mode {
		case 'j':
			ev, err = s.nextValue()
		case 'a':
			ev, err = s.nextElement()
		case 's':
			ev, err = s.nextSSE()
		}
	}
	if err != nil {
		s.err = err
		return nil, err
	}
	s.last = ev
	s.events++
	return ev, nil
}

// Close gives the reader's read buffer back for other readers to reuse
// (an HTTP bridge reads a small body per request): the bytes the last Next
// returned are invalid after it, and Next returns ErrStreamClosed.
// Calling it is optional; a reader dropped unclosed is collected as usual.
func (s *StreamReader) Close() {
	if s.err == ErrStreamClosed {
		return
	}
	poison(s.last)
	s.last = nil
	putReadBuf(s.buf)
	s.buf, s.start, s.end = nil, 0, 0
	s.err = ErrStreamClosed
}

// ErrStreamClosed is what a StreamReader's Next returns after Close.
var ErrStreamClosed = errors.New("codec: stream reader closed")

// readBufs keep the read buffers a StreamReader reads with, one pool per
// size from initialReadSize to fullReadSize (each twice the last), for
// the next reader; larger ones, grown for a large event, are left to the
// collector.
var readBufs [5]sync.Pool

func readBufPool(size int) *sync.Pool {
	for i, n := 0, initialReadSize; n <= fullReadSize; i, n = i+1, n*2 {
		if size == n {
			return &readBufs[i]
		}
	}
	return nil
}

func getReadBuf(size int) []byte {
	if p := readBufPool(size); p != nil {
		if b, ok := p.Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, size)
}

func putReadBuf(b []byte) {
	if p := readBufPool(len(b)); p != nil && cap(b) == len(b) {
		poison(b)
		p.Put(&b)
	}
}

// fill reads more input, compacting or growing the buffer as needed. It
// reports whether any byte was added.
func (s *StreamReader) fill() bool {
	if s.eof || s.rerr != nil {
		return false
	}
	if s.end == len(s.buf) {
		if s.start > 0 {
			n := copy(s.buf, s.buf[s.start:s.end])
			s.base += int64(s.start)
			s.start, s.end = 0, n
		}
		if s.end == len(s.buf) || len(s.buf) < fullReadSize {
			size := 2 * len(s.buf)
			if size < initialReadSize {
				size = initialReadSize
			}
			if lim := s.max + 4096; size > lim && lim > s.end {
				size = lim
			}
			nb := getReadBuf(size)
			copy(nb, s.buf[:s.end])
			putReadBuf(s.buf)
			s.buf = nb
		}
	}
	for tries := 0; tries < 100; tries++ {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			s.rerr = err
		}
		if n > 0 || err != nil {
			return n > 0
		}
	}
	s.rerr = io.ErrNoProgress
	return false
}

// endErr is what a stream that ends cleanly here returns.
func (s *StreamReader) endErr() error {
	if s.rerr != nil {
		return s.rerr
	}
	return io.EOF
}

// consume advances the window by n bytes, counting lines.
func (s *StreamReader) consume(n int) {
	s.line += bytes.Count(s.buf[s.start:s.start+n], []byte{'\n'})
	s.start += n
}

// streamErr builds a framing error at window offset rel.
func (s *StreamReader) streamErr(k Kind, rel int, detail string) *Error {
	p := s.start + rel
	if p > s.end {
		p = s.end
	}
	e := &Error{Kind: k, Verdict: Fatal, Detail: detail,
		Offset: int(s.base) + p,
		Line:   s.line + bytes.Count(s.buf[s.start:p], []byte{'\n'})}
	q := p + maxQuote + 1
	if q > s.end {
		q = s.end
	}
	e.Quote = quote(s.buf[p:q])
	return e
}

// skipBlank consumes whitespace (and a leading UTF-8 BOM) and returns the
// next byte, or false at the end of input.
func (s *StreamReader) skipBlank() (byte, bool) {
	for {
		for s.start < s.end {
			switch c := s.buf[s.start]; c {
			case ' ', '\t', '\r':
				s.start++
			case '\n':
				s.start++
				s.line++
			default:
				return c, true
			}
		}
		if !s.fill() {
			return 0, false
		}
	}
}

func (s *StreamReader) detect() error {
	for s.end-s.start < 3 && s.fill() {
	}
	if s.base == 0 && s.start == 0 && bytes.HasPrefix(s.buf[:s.end], []byte("\xef\xbb\xbf")) {
		s.start = 3
	}
	c, ok := s.skipBlank()
	if !ok {
		return s.endErr()
	}
	switch c {
	case '{':
		s.mode = 'j'
	case '[':
		s.mode = 'a'
		s.start++
	default:
		s.mode = 's'
	}
	return nil
}

// scanValue finds the end of the JSON value at the window start; it returns
// its length. It tracks only strings and nesting (jsonscan's rules, across
// reads): Decode validates the rest.
func (s *StreamReader) scanValue() (int, error) {
	var sc jsonscan.Scanner
	rel := 0
	for {
		end, st := sc.Scan(s.buf[s.start:s.end], rel)
		switch st {
		case jsonscan.Done:
			return end, nil
		case jsonscan.Closer:
			return 0, s.streamErr(KindStream, end, "unbalanced '"+string(s.buf[s.start+end])+"'")
		}
		rel = end
		if n := s.end - s.start; n > s.max {
			return 0, s.streamErr(KindTooLarge, 0, "event larger than "+strconv.Itoa(s.max)+" bytes (SetMaxEventSize)")
		}
		if !s.fill() {
			if n := s.end - s.start; sc.Complete() && n > 0 {
				return n, nil // a scalar at the very end
			}
			if s.rerr != nil {
				return 0, s.rerr
			}
			return 0, s.streamErr(KindTruncated, 0, "stream ends inside a JSON value")
		}
	}
}

func (s *StreamReader) take(n int) ([]byte, error) {
	if n > s.max {
		return nil, s.streamErr(KindTooLarge, 0, "event larger than "+strconv.Itoa(s.max)+" bytes (SetMaxEventSize)")
	}
	ev := s.buf[s.start : s.start+n : s.start+n]
	s.consume(n)
	return ev, nil
}

func (s *StreamReader) nextValue() ([]byte, error) {
	c, ok := s.skipBlank()
	if !ok {
		return nil, s.endErr()
	}
	if c != '{' {
		return nil, s.streamErr(KindStream, 0, "expected '{' starting the next event (JSONL)")
	}
	n, err := s.scanValue()
	if err != nil {
		return nil, err
	}
	return s.take(n)
}

func (s *StreamReader) nextElement() ([]byte, error) {
	for {
		c, ok := s.skipBlank()
		if !ok {
			if s.arrSt == 2 {
				return nil, s.endErr()
			}
			if s.rerr != nil {
				return nil, s.rerr
			}
			return nil, s.streamErr(KindTruncated, 0, "stream ends inside the JSON array (missing ']')")
		}
		switch s.arrSt {
		case 2:
			return nil, s.streamErr(KindStream, 0, "data after the closing ']' of the event array")
		case 1:
			switch c {
			case ',':
				s.consume(1)
				s.arrSt = 3 // an element must follow
				continue
			case ']':
				s.consume(1)
				s.arrSt = 2
				continue
			}
			return nil, s.streamErr(KindStream, 0, "expected ',' or ']' after an array element")
		default: // 0: element or ']'; 3: element required
			if c == ']' {
				if s.arrSt == 3 {
					return nil, s.streamErr(KindStream, 0, "trailing ',' before ']'")
				}
				s.consume(1)
				s.arrSt = 2
				continue
			}
			if c == ',' {
				return nil, s.streamErr(KindStream, 0, "expected an array element")
			}
			n, err := s.scanValue()
			if err != nil {
				return nil, err
			}
			s.arrSt = 1
			return s.take(n)
		}
	}
}

// readLine returns the next line without its terminator ("\r\n", "\n" or a
// bare "\r", as the event-stream format allows), consuming it; ok is false
// at the end of input. A last line without a terminator is returned too
// (eofLine true).
func (s *StreamReader) readLine() (line []byte, eofLine bool, ok bool, err error) {
	from := 0
	for {
		if i := bytes.IndexAny(s.buf[s.start+from:s.end], "\r\n"); i >= 0 {
			n := from + i
			term := 1
			if s.buf[s.start+n] == '\r' {
				if s.start+n+1 == s.end && s.fill() {
					continue // is the CR followed by LF? read on to see
				}
				if s.start+n+1 < s.end && s.buf[s.start+n+1] == '\n' {
					term = 2
				}
			}
			l := s.buf[s.start : s.start+n]
			s.start += n + term
			s.line++
			return l, false, true, nil
		}
		from = s.end - s.start
		if from > s.max {
			return nil, false, false, s.streamErr(KindTooLarge, 0, "SSE line longer than "+strconv.Itoa(s.max)+" bytes (SetMaxEventSize)")
		}
		if !s.fill() {
			if s.rerr != nil {
				return nil, false, false, s.rerr
			}
			if s.end > s.start {
				l := s.buf[s.start:s.end]
				s.start = s.end
				return l, true, true, nil
			}
			return nil, false, false, nil
		}
	}
}

func (s *StreamReader) nextSSE() ([]byte, error) {
	s.evBufs[s.cur] = s.ev
	s.cur ^= 1
	s.ev = s.evBufs[s.cur][:0]
	s.hasEv = false
	for {
		startLine := s.line
		lineStart := int(s.base) + s.start
		line, eofLine, ok, err := s.readLine()
		if err != nil {
			return nil, err
		}
		if !ok || eofLine && len(line) == 0 {
			if s.hasEv {
				e := &Error{Kind: KindTruncated, Verdict: Fatal, Line: s.evLine, Offset: s.evOff,
					Detail: "stream ends in the middle of an SSE event (no blank line after its data); the incomplete event is not dispatched"}
				return nil, e
			}
			return nil, io.EOF
		}
		if len(line) == 0 {
			if s.hasEv {
				return s.ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue // id, retry, event and unknown fields are ignored (X14)
		}
		if s.hasEv {
			s.ev = append(s.ev, '\n')
		} else {
			s.evLine, s.evOff = startLine, lineStart
		}
		s.ev = append(s.ev, value...)
		s.hasEv = true
		if len(s.ev) > s.max {
			e := &Error{Kind: KindTooLarge, Verdict: Fatal, Line: startLine, Offset: lineStart,
				Detail: "SSE event data larger than " + strconv.Itoa(s.max) + " bytes (SetMaxEventSize)"}
			return nil, e
		}
		if eofLine {
			e := &Error{Kind: KindTruncated, Verdict: Fatal, Line: s.evLine, Offset: s.evOff,
				Detail: "stream ends in the middle of an SSE event (no blank line after its data); the incomplete event is not dispatched"}
			return nil, e
		}
	}
}
