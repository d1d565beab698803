package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"unicode/utf8"
)

// seedEvents adds every event of the conformance corpus and of the
// benchmark mix (a sample) to the fuzz corpus.
func seedEvents(f *testing.F) [][]byte {
	var all [][]byte
	for _, c := range loadCorpus(f) {
		all = append(all, c.events...)
	}
	mix := loadMix(f)
	for i := 0; i < len(mix); i += 50 {
		all = append(all, mix[i])
	}
	return all
}

// FuzzDecode: Decode never panics; it accepts only valid JSON; whatever it
// accepts re-encodes to an event that decodes equal, with nothing left to
// strip; and Clone copies it faithfully.
func FuzzDecode(f *testing.F) {
	for _, e := range seedEvents(f) {
		f.Add(e)
	}
	// Shapes the corpus lacks: shims, strips, escapes, 1.1 fields.
	for _, s := range []string{
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"binary","mimeType":"image/png","data":"AA","filename":"f"},{"type":"image","source":{"type":"s3","value":"v"}},{"type":"video","source":{"type":"url","value":"u"},"metadata":null}]}]}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.2","input":{"threadId":"t","runId":"r","messages":[],"state":null,"tools":[{"name":"n","description":"d","parameters":null,"x":1}],"resume":[{"interruptId":"i","status":"maybe"}]}}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"r","extra":[]}]},"usage":[{"inputTokens":1e3,"foo":1}],"rawEvent":null}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"\u006d","delta":"\ud83d\"\u0000","timestamp":1.0e3}`,
		`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"v","encryptedValueType":"t"}`,
		`{"type":"THINKING_START","title":"t"}`,
		`{"type":"CUSTOM","name":"n","value":[1e308,-0.5e-999,1E+309,12345678901234567890123]}`,
		`{"delta":"d","type":"THINKING_TEXT_MESSAGE_CONTENT","messageId":"m"}`,
	} {
		f.Add([]byte(s))
	}
	var d, d2 Decoder
	var ev, ev2 Event
	f.Fuzz(func(t *testing.T, data []byte) {
		err := d.Decode(data, &ev)
		// encoding/json.Valid accepts invalid UTF-8; the codec does not
		// (RFC 8259 §8.1: JSON exchanged between systems is UTF-8), so
		// "valid" here means both.
		valid := json.Valid(data) && utf8.Valid(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if !valid && e.Verdict != Fatal {
				t.Fatalf("invalid JSON %q got verdict %v: %v", data, e.Verdict, err)
			}
			if valid && e.Kind == KindSyntax {
				t.Fatalf("valid JSON %q reported as a syntax error: %v", data, err)
			}
			_ = e.Error()
			return
		}
		if !valid {
			t.Fatalf("Decode accepted invalid JSON %q", data)
		}
		for _, w := range d.Warnings() {
			_ = w.Error()
		}
		if d.retired {
			// A translated THINKING_* event lacks the messageId its
			// consumer gives it (retired.go); given one, it is an ordinary
			// event like any other.
			ev.MessageID, ev.Fields = "minted", ev.Fields.With(FieldMessageID)
		}
		cl := ev.Clone()
		enc := AppendEvent(nil, &ev)
		if !json.Valid(enc) {
			t.Fatalf("AppendEvent wrote invalid JSON %q for %q", enc, data)
		}
		if err := d2.Decode(enc, &ev2); err != nil {
			t.Fatalf("re-decode of %q (from %q): %v", enc, data, err)
		}
		if hasStrip(d2.Warnings()) {
			t.Fatalf("re-encoded %q still has material to strip: %v", enc, d2.Warnings())
		}
		if diff := eventDiff(&ev, &ev2); diff != "" {
			t.Fatalf("round trip of %q via %q: %s", data, enc, diff)
		}
		if diff := eventDiff(&ev, cl); diff != "" {
			t.Fatalf("clone of %q: %s", data, diff)
		}
	})
}

// FuzzStreamReader: the reader never panics, always terminates, returns
// non-empty events no larger than its bound, and reports framing problems
// as *Error values naming a line.
func FuzzStreamReader(f *testing.F) {
	evs := seedEvents(f)
	for i := 0; i+2 < len(evs); i += 3 {
		a, b := evs[i], evs[i+1]
		f.Add(append(append(append([]byte{}, a...), '\n'), b...))
		f.Add([]byte("[" + string(a) + "," + string(b) + "]"))
		f.Add([]byte("data: " + string(bytes.ReplaceAll(a, []byte("\n"), []byte("\ndata: "))) + "\n\n: c\nid: 1\n\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range []int{DefaultMaxEventSize, 64} {
			sr := NewStreamReader(iotestHalf(data))
			sr.SetMaxEventSize(max)
			for n := 0; ; n++ {
				if n > len(data)+1 {
					t.Fatalf("more events than input bytes for %q", data)
				}
				ev, err := sr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					var e *Error
					if !errors.As(err, &e) || e.Line < 1 || e.Offset < 0 || e.Offset > len(data) {
						t.Fatalf("bad error %#v for %q", err, data)
					}
					break
				}
				if len(ev) > max {
					t.Fatalf("event of %d bytes over the %d bound", len(ev), max)
				}
				if sr.Format() != "sse" && len(ev) == 0 {
					t.Fatalf("empty event from %q", data)
				}
			}
		}
	})
}

// iotestHalf returns a reader that yields data in small pieces, so that the
// buffer refill paths are fuzzed too.
func iotestHalf(data []byte) io.Reader { return &chunkReader{data: data, n: 7} }

type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n, len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzAppendString: AppendString always writes a JSON string, and valid
// UTF-8 comes back unchanged through encoding/json.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c\n", "é😀", "\xed\xa0\xbd\xed\xb8\x80", "\xff", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, enc, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("AppendString(%q) reads back as %q", s, back)
		}
		// Through our own decoder the string also survives.
		var d Decoder
		var ev Event
		if err := d.Decode([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":`+string(enc)+`}`), &ev); err != nil {
			t.Fatalf("decode of %s: %v", enc, err)
		}
		if utf8.ValidString(s) && ev.Delta != s {
			t.Fatalf("delta %q, want %q", ev.Delta, s)
		}
	})
}
