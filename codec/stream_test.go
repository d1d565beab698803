package codec

import (
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader, max int) ([]string, error) {
	t.Helper()
	sr := NewStreamReader(r)
	if max > 0 {
		sr.SetMaxEventSize(max)
	}
	var out []string
	for {
		ev, err := sr.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(ev))
	}
}

func TestStreamReaderFormats(t *testing.T) {
	a := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
	b := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"}{\"]"}`
	tests := []struct {
		name   string
		give   string
		want   []string
		format string
	}{
		{"jsonl", a + "\n" + b + "\n", []string{a, b}, "jsonl"},
		{"jsonl crlf, blank lines, no final newline", "\r\n" + a + "\r\n\r\n" + b, []string{a, b}, "jsonl"},
		{"pretty-printed objects", "{\n  \"type\": \"RAW\",\n  \"event\": {}\n}\n" + a, []string{"{\n  \"type\": \"RAW\",\n  \"event\": {}\n}", a}, "jsonl"},
		{"bom", "\xef\xbb\xbf" + a, []string{a}, "jsonl"},
		{"array", "[" + a + ",\n " + b + "]\n", []string{a, b}, "array"},
		{"empty array", " [ ] ", nil, "array"},
		{"array with scalar element", "[" + a + ", 42, \"x\"]", []string{a, "42", `"x"`}, "array"},
		{"sse", "data: " + a + "\n\nid: 7\nevent: message\nretry: 10\ndata: " + b + "\n\n", []string{a, b}, "sse"},
		{"sse multi-line data joined with newline", "data: {\"type\":\"RAW\",\ndata: \"event\":1}\n\n", []string{"{\"type\":\"RAW\",\n\"event\":1}"}, "sse"},
		{"sse comments and crlf", ": keep-alive\r\n\r\ndata:" + a + "\r\n\r\n", []string{a}, "sse"},
		{"sse bare cr line endings", "data: " + a + "\r\rdata: " + b + "\r\r", []string{a, b}, "sse"},
		{"sse unknown field ignored", "foo: bar\ndata: " + a + "\n\n", []string{a}, "sse"},
		{"empty", "", nil, ""},
		{"only whitespace", " \n\t", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, rd := range []struct {
				name string
				r    io.Reader
			}{{"whole", strings.NewReader(tt.give)}, {"one byte", iotest.OneByteReader(strings.NewReader(tt.give))}} {
				got, err := readAll(t, rd.r, 0)
				if err != nil {
					t.Fatalf("%s: %v", rd.name, err)
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
					t.Fatalf("%s: got %q, want %q", rd.name, got, tt.want)
				}
			}
			sr := NewStreamReader(strings.NewReader(tt.give))
			sr.Next()
			if sr.Format() != tt.format {
				t.Errorf("Format() = %q, want %q", sr.Format(), tt.format)
			}
		})
	}
}

func TestStreamReaderErrors(t *testing.T) {
	big := `{"type":"RAW","event":"` + strings.Repeat("x", 200) + `"}`
	tests := []struct {
		name     string
		give     string
		max      int
		wantKind Kind
		wantLine int
		wantOff  int
		nOK      int // events returned before the error
	}{
		{"jsonl garbage line", "{\"a\":1}\nnot json\n", 0, KindStream, 2, 8, 1},
		{"jsonl unterminated object", "{\"a\":1}\n{\"b\":", 0, KindTruncated, 2, 8, 1},
		{"jsonl unbalanced close", "{\"a\":1}}\n", 0, KindStream, 1, 7, 1},
		{"array missing close", "[{\"a\":1}", 0, KindTruncated, 1, 8, 1},
		{"array missing comma", "[{\"a\":1} {\"b\":2}]", 0, KindStream, 1, 9, 1},
		{"array trailing comma", "[{\"a\":1},]", 0, KindStream, 1, 9, 1},
		{"array leading comma", "[,{\"a\":1}]", 0, KindStream, 1, 1, 0},
		{"data after array", "[{\"a\":1}]\n[]", 0, KindStream, 2, 10, 1},
		{"event too large jsonl", big, 100, KindTooLarge, 1, 0, 0},
		{"event too large array", "[\n" + big + "]", 100, KindTooLarge, 2, 2, 0},
		{"sse line too long", "data: " + big + "\n\n", 100, KindTooLarge, 1, 0, 0},
		{"sse data too large", strings.Repeat("data: "+strings.Repeat("y", 60)+"\n", 3) + "\n", 100, KindTooLarge, 2, 67, 0},
		{"sse incomplete event at eof", "data: {\"a\":1}\n\ndata: {\"b\":2}\n", 0, KindTruncated, 3, 15, 1},
		{"sse incomplete event without newline", "data: {\"a\":1}", 0, KindTruncated, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, strings.NewReader(tt.give), tt.max)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %q, err %v; want an *Error", got, err)
			}
			if e.Kind != tt.wantKind || e.Line != tt.wantLine || e.Offset != tt.wantOff || e.Verdict != Fatal {
				t.Errorf("got kind %v line %d offset %d verdict %v (%v), want kind %v line %d offset %d",
					e.Kind, e.Line, e.Offset, e.Verdict, e, tt.wantKind, tt.wantLine, tt.wantOff)
			}
			if len(got) != tt.nOK {
				t.Errorf("%d events before the error, want %d", len(got), tt.nOK)
			}
			if tt.wantKind == KindTruncated && !(errors.Is(err, ErrTruncated) && errors.Is(err, ErrStream)) {
				t.Errorf("a truncation %v is not both ErrTruncated and ErrStream", err)
			}
			if !strings.HasPrefix(e.Error(), "codec: line ") {
				t.Errorf("message %q does not name the line", e.Error())
			}
		})
	}
}

func TestStreamReaderErrorsAreSticky(t *testing.T) {
	sr := NewStreamReader(strings.NewReader("{\"a\":1}\nxx\n{\"b\":2}\n"))
	if _, err := sr.Next(); err != nil {
		t.Fatal(err)
	}
	_, err1 := sr.Next()
	_, err2 := sr.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v then %v; want the same error twice", err1, err2)
	}
}

func TestStreamReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	sr := NewStreamReader(io.MultiReader(strings.NewReader("{\"a\":1}\n{\"b\""), iotest.ErrReader(boom)))
	if _, err := sr.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := sr.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the reader's error", err)
	}
	sse := NewStreamReader(io.MultiReader(strings.NewReader("data: x"), iotest.ErrReader(boom)))
	if _, err := sse.Next(); !errors.Is(err, boom) {
		t.Fatalf("sse: got %v, want the reader's error", err)
	}
}

// TestStreamReaderCorpus frames every corpus stream three ways and checks
// that the reader returns each event's bytes unchanged.
func TestStreamReaderCorpus(t *testing.T) {
	for _, c := range loadCorpus(t) {
		var jsonl, arr, sse strings.Builder
		arr.WriteString("[")
		for i, e := range c.events {
			jsonl.Write(e)
			jsonl.WriteString("\n")
			if i > 0 {
				arr.WriteString(",")
			}
			arr.Write(e)
			for _, l := range strings.Split(string(e), "\n") {
				sse.WriteString("data: " + l + "\n")
			}
			sse.WriteString("\n")
		}
		arr.WriteString("]")
		for _, in := range []string{jsonl.String(), arr.String(), sse.String()} {
			got, err := readAll(t, strings.NewReader(in), 0)
			if err != nil {
				t.Fatalf("%s: %v", c.file, err)
			}
			if len(got) != len(c.events) {
				t.Fatalf("%s: %d events, want %d", c.file, len(got), len(c.events))
			}
			for i := range got {
				if got[i] != string(c.events[i]) {
					t.Fatalf("%s event %d: got %q want %q", c.file, i, got[i], c.events[i])
				}
			}
		}
	}
}

// streamBytes reads every event of body with a new StreamReader.
func streamBytes(tb testing.TB, body string) {
	streamBytesClose(tb, body, false)
}

// streamBytesClose reads body's events and, when close, closes the reader
// (its buffer goes back to the pool).
func streamBytesClose(tb testing.TB, body string, close bool) {
	sr := NewStreamReader(strings.NewReader(body))
	if close {
		defer sr.Close()
	}
	for {
		if _, err := sr.Next(); err != nil {
			if err != io.EOF {
				tb.Fatal(err)
			}
			return
		}
	}
}

// A closed reader's buffer serves the next reader: reading a small body
// then allocates little. Next after Close fails, and an event
// held past Close is poisoned (under tcpoison).
func TestStreamReaderClose(t *testing.T) {
	body := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n"
	for range 10 {
		streamBytesClose(t, body, true)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		streamBytesClose(t, body, true)
	}
	runtime.ReadMemStats(&after)
	// Half the 4 KiB buffer: a reader that drops its buffer allocates it
	// whole, and under -race sync.Pool drops a quarter of what it is given.
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 2<<10 {
		t.Errorf("a %d-byte body read by a closed reader allocated %d bytes per reader, want at most 2 KiB", len(body), per)
	}

	sr := NewStreamReader(strings.NewReader(body + body))
	ev, err := sr.Next()
	if err != nil || string(ev) != strings.TrimSuffix(body, "\n") {
		t.Fatalf("first event %q, %v", ev, err)
	}
	sr.Close()
	sr.Close()
	if _, err := sr.Next(); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("Next after Close: %v, want ErrStreamClosed", err)
	}
	if poisonEnabled && strings.Trim(string(ev), "#") != "" {
		t.Errorf("an event held past Close reads %q, want it poisoned", ev)
	}
}

// TestStreamReaderSmallBodyBuffer: a reader of a small body (one HTTP
// bridge request's) allocates about what the body needs, not a 64 KiB
// buffer; a large body still reads whole.
func TestStreamReaderSmallBodyBuffer(t *testing.T) {
	body := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		streamBytes(t, body)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 8<<10 {
		t.Errorf("a %d-byte body allocated %d bytes per reader, want at most 8 KiB", len(body), per)
	}
	big := strings.Repeat(body, 10000) // 610 KB: the buffer grows
	got, err := readAll(t, strings.NewReader(big), 0)
	if err != nil || len(got) != 10000 || got[9999] != strings.TrimSuffix(body, "\n") {
		t.Fatalf("large body: %d events, %v", len(got), err)
	}
}

// BenchmarkStreamReaderBody reads a body of one small event and one of
// 1,000 (61 KB) with a new reader each time, as the bridge does per
// request: dropped (its buffer left to the collector) and closed (its
// buffer back to the pool, as the bridge does).
func BenchmarkStreamReaderBody(b *testing.B) {
	ev := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}` + "\n"
	for _, n := range []int{1, 1000} {
		body := strings.Repeat(ev, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				streamBytes(b, body)
			}
		})
		b.Run(strconv.Itoa(n)+"-closed", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				streamBytesClose(b, body, true)
			}
		})
	}
}
