package codec

import (
	"strings"
	"testing"
)

// TestPoisonHeldDecoderView shows what happens to a view kept past its
// lifetime ("valid until the next Decode or Reset of the Decoder"): under
// the tcpoison tag the Decoder's scratch is overwritten with '#' first, so
// the stale string reads as "####…" instead of plausible old data.
func TestPoisonHeldDecoderView(t *testing.T) {
	if !poisonEnabled {
		t.Skip("poisoning is compiled in only with -tags tcpoison (CI runs it)")
	}
	var d Decoder
	var ev Event
	// The escape forces the delta into scratch (an unescaped copy).
	if err := d.Decode([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"caf\u00e9"}`), &ev); err != nil {
		t.Fatal(err)
	}
	held := ev.Delta // a view: wrong to keep
	kept := strings.Clone(ev.Delta)
	if held != "café" {
		t.Fatalf("delta = %q", held)
	}
	d.Reset()
	if held != strings.Repeat("#", len(held)) {
		t.Fatalf("held view after Reset = %q; want it poisoned", held)
	}
	if kept != "café" {
		t.Fatalf("copy changed: %q", kept)
	}
	// Same through the next Decode, for a cleaned nested value.
	if err := d.Decode([]byte(`{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"text","text":"ok"},{"type":"x"}]}`), &ev); err != nil {
		t.Fatal(err)
	}
	content := ev.Content
	if string(content) != `[{"type":"text","text":"ok"}]` {
		t.Fatalf("content = %s", content)
	}
	if err := d.Decode([]byte(`{"type":"TEXT_MESSAGE_END","messageId":"m"}`), &ev); err != nil {
		t.Fatal(err)
	}
	if string(content) != strings.Repeat("#", len(content)) {
		t.Fatalf("held cleaned content after the next Decode = %s; want it poisoned", content)
	}
}

// TestPoisonHeldStreamBytes: the bytes Next returns are valid until the
// next call to Next.
func TestPoisonHeldStreamBytes(t *testing.T) {
	if !poisonEnabled {
		t.Skip("poisoning is compiled in only with -tags tcpoison (CI runs it)")
	}
	for _, in := range []string{
		"{\"a\":1}\n{\"b\":2}\n",
		"[{\"a\":1},{\"b\":2}]",
		"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
	} {
		sr := NewStreamReader(strings.NewReader(in))
		first, err := sr.Next()
		if err != nil || string(first) != `{"a":1}` {
			t.Fatalf("%q: first = %q, %v", in, first, err)
		}
		if _, err := sr.Next(); err != nil {
			t.Fatal(err)
		}
		if string(first) != "#######" {
			t.Fatalf("%q: held event after Next = %q; want it poisoned", in, first)
		}
	}
}
