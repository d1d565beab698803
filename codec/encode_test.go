package codec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"plain", "hello", `"hello"`},
		{"empty", "", `""`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"other controls", "\x00\x1f", `"\u0000\u001f"`},
		{"utf8 kept", "héllo 😀", `"héllo 😀"`},
		{"html not escaped", "<a>&", `"<a>&"`},
		{"line separator kept", "\u2028", "\"\u2028\""},
		{"wtf8 pair joins", "\xed\xa0\xbd\xed\xb8\x80", `"😀"`},
		{"lone high", "x\xed\xa0\xbd", `"x\ud83d"`},
		{"lone low", "\xed\xb8\x80y", `"\ude00y"`},
		{"low then high stays escaped", "\xed\xb8\x80\xed\xa0\xbd", `"\ude00\ud83d"`},
		{"invalid byte", "a\xffb", `"a\ufffdb"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendString(nil, tt.give)); got != tt.want {
				t.Errorf("AppendString(%q) = %s, want %s", tt.give, got, tt.want)
			}
		})
	}
}

// TestSplitSurrogatePairReassembles is envelope.md §7 note 4: a producer
// splits 😀 (U+1F600) into two deltas "\ud83d" and "\ude00". JavaScript joins
// the halves into the character; so must decode → concatenate → encode.
func TestSplitSurrogatePairReassembles(t *testing.T) {
	var d Decoder
	var ev Event
	var text string
	for _, in := range []string{
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\ud83d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\ude00b"}`,
	} {
		if err := d.Decode([]byte(in), &ev); err != nil {
			t.Fatal(err)
		}
		// What a reducer does, copying once: `text += ev.Delta` alone would
		// keep a view when text is "" (Go returns the other operand of a
		// concatenation with ""), which the next Decode overwrites.
		text += strings.Clone(ev.Delta)
	}
	got := AppendString(nil, text)
	if want := `"a😀b"`; string(got) != want {
		t.Fatalf("joined deltas encode as %s, want %s", got, want)
	}
	var viaStd string
	if err := json.Unmarshal(got, &viaStd); err != nil || viaStd != "a😀b" {
		t.Fatalf("encoding/json reads %q, %v", viaStd, err)
	}
	// The lone half on its own is re-escaped, never turned into U+FFFD.
	if err := d.Decode([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\ud83d"}`), &ev); err != nil {
		t.Fatal(err)
	}
	if got := AppendEvent(nil, &ev); !bytes.Contains(got, []byte(`"delta":"\ud83d"`)) {
		t.Fatalf("lone surrogate re-encoded as %s", got)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "abc", "tab\there", "quote\"", "é中😀", "\x7f", "ctl\x01"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
	}
}

// TestCloneOwnsItsMemory decodes every corpus event, clones it, then
// destroys everything the original viewed (the input buffer and, through
// further decodes, the Decoder's scratch) and checks the clone still equals
// a fresh decode of the original bytes.
func TestCloneOwnsItsMemory(t *testing.T) {
	var d, fresh Decoder
	var ev, want Event
	n := 0
	for _, c := range loadCorpus(t) {
		for _, data := range c.events {
			buf := bytes.Clone(data)
			if d.Decode(buf, &ev) != nil {
				continue
			}
			cl := ev.Clone()
			for i := range buf {
				buf[i] = '#'
			}
			d.Decode([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"\u0078\u0078\u0078\u0078\u0078\u0078","delta":"\u0079\u0079\u0079\u0079"}`), &ev)
			d.Reset()
			if err := fresh.Decode(data, &want); err != nil {
				t.Fatal(err)
			}
			if diff := eventDiff(cl, &want); diff != "" {
				t.Errorf("%s: clone differs after its source was destroyed: %s", c.file, diff)
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d events cloned", n)
	}
}

func TestAppendMessageRequiredFields(t *testing.T) {
	tests := []struct {
		name string
		give Message
		want string
	}{
		{"assistant without content", Message{ID: "a", Role: "assistant"}, `{"id":"a","role":"assistant"}`},
		{"user content defaults to empty string", Message{ID: "u", Role: "user"}, `{"id":"u","role":"user","content":""}`},
		{"tool needs toolCallId", Message{ID: "t", Role: "tool", Content: Raw(`"r"`), Fields: FieldSet(0).With(MsgContent)},
			`{"id":"t","role":"tool","content":"r","toolCallId":""}`},
		{"activity", Message{ID: "x", Role: "activity", ActivityType: "PLAN"}, `{"id":"x","role":"activity","content":{},"activityType":"PLAN"}`},
		{"name not on tool", Message{ID: "t", Role: "tool", Name: "n", Fields: FieldSet(0).With(MsgName)},
			`{"id":"t","role":"tool","content":"","toolCallId":""}`},
		{"tool calls", Message{ID: "a", Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: "{}"}}},
			`{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendMessage(nil, &tt.give))
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var d Decoder
			if _, err := d.DecodeMessages([]byte("[" + got + "]")); err != nil {
				t.Errorf("encoded message does not decode: %v", err)
			}
		})
	}
}

func TestAppendPatchFromOps(t *testing.T) {
	ops := []PatchOp{
		{Op: OpAdd, Path: "/a", Value: Raw("null")},
		{Op: OpRemove, Path: "/b"},
		{Op: OpMove, From: "/c", Path: "/d"},
		{Op: OpReplace, Path: ""},
	}
	got := string(AppendPatch(nil, ops))
	want := `[{"op":"add","path":"/a","value":null},{"op":"remove","path":"/b"},{"op":"move","path":"/d","from":"/c"},{"op":"replace","path":"","value":null}]`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAppendUnquoted(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr bool
	}{
		{`"plain"`, "plain", false},
		{`"a\nb\u00e9\"\\\/"`, "a\nbé\"\\/", false},
		{`"\ud83d\ude00"`, "😀", false},
		{`"\ud83d"`, "\xed\xa0\xbd", false},
		{`""`, "", false},
		{`plain`, "", true},
		{`"open`, "", true},
		{`"a" `, "", true},
		{`"\q"`, "", true},
		{``, "", true},
	}
	for _, tt := range tests {
		got, err := AppendUnquoted([]byte("x"), []byte(tt.give))
		if (err != nil) != tt.wantErr {
			t.Errorf("AppendUnquoted(%s) error %v, wantErr %v", tt.give, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && string(got) != "x"+tt.want {
			t.Errorf("AppendUnquoted(%s) = %q, want %q", tt.give, got, "x"+tt.want)
		}
		if !tt.wantErr {
			// Text → AppendString → AppendUnquoted gives the same text back.
			again, err := AppendUnquoted(nil, AppendString(nil, string(got[1:])))
			if err != nil || string(again) != tt.want {
				t.Errorf("re-quoting %q gives %q, %v", tt.want, again, err)
			}
		}
	}
}
