package codec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// decodeResult is everything a Decode reports, as text, for comparing two
// Decodes of the same bytes.
func decodeResult(d *Decoder, data []byte) (string, *Event) {
	var ev Event
	err := d.Decode(data, &ev)
	var out []string
	if err != nil {
		e := err.(*Error)
		out = append(out, fmt.Sprintf("error %v kind=%v verdict=%v field=%q type=%v/%q", e, e.Kind, e.Verdict, e.Field, e.Type, e.TypeName))
	}
	for _, w := range d.Warnings() {
		out = append(out, fmt.Sprintf("warning %v kind=%v field=%q", w, w.Kind, w.Field))
	}
	return strings.Join(out, "\n"), &ev
}

// TestGuessedKeysDecodeAlike: whatever member order a Decoder guesses
// (guessKey), an event decodes exactly as by a fresh Decoder. Each event
// is decoded with every field as the guess for every member, which makes
// every name be checked against every pattern: right guesses, wrong ones,
// and names one pattern is a prefix of.
func TestGuessedKeysDecodeAlike(t *testing.T) {
	var evs [][]byte
	for _, c := range loadCorpus(t) {
		evs = append(evs, c.events...)
	}
	mix := loadMix(t)
	for i := 0; i < len(mix); i += 25 {
		evs = append(evs, mix[i])
	}
	for _, s := range []string{
		// Names near a pattern: longer, shorter, escaped, spaced, cut off.
		`{"type":"TEXT_MESSAGE_CONTENT","messageIdx":"m","messageId":"m","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delt":"d","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","message\u0049d":"m","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId" :"m", "delta"  :  "d" }`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","del`,
		`{"type":"RUN_ERROR","code":"c","message":"m"}`, // "message" begins "messageId"
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","type":"TEXT_MESSAGE_END"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"n","parentMessageId":"p","x":1}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n","parentSubagentRunId":"p","parentToolCallId":"c"}`,
		`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v","encryptedValueType":"t"}`,
		`{"type":"STEP_STARTED","stepName":"s","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"timestamp":7,"g":8}`,
	} {
		evs = append(evs, []byte(s))
	}
	for _, data := range evs {
		decodesAlikeGuessing(t, data, "guessing", func(d *Decoder) *[numTypes][numFields + 1]Field { return &d.shapes })
	}
}

// decodesAlikeGuessing decodes data with every field as the guess held in
// the table table returns, for every type and member, and fails unless
// each result is a fresh Decoder's.
func decodesAlikeGuessing(t *testing.T, data []byte, what string, table func(*Decoder) *[numTypes][numFields + 1]Field) {
	t.Helper()
	var fresh Decoder
	want, wantEv := decodeResult(&fresh, data)
	for g := Field(0); g < numFields; g++ {
		var d Decoder
		tab := table(&d)
		for ty := range tab {
			for i := range tab[ty] {
				tab[ty][i] = g
			}
		}
		got, gotEv := decodeResult(&d, data)
		if got != want {
			t.Fatalf("%s %s %v:\n got %s\nwant %s", data, what, g, got, want)
		}
		if diff := eventDiff(gotEv, wantEv); diff != "" {
			t.Fatalf("%s %s %v: %s", data, what, g, diff)
		}
	}
}

// TestTypeAt holds typeAt to ParseType: it must recognise every type name
// of eight bytes or more when 32 bytes follow, and never report a type
// ParseType would not, for names one edit away from the real ones and for
// random names.
func TestTypeAt(t *testing.T) {
	const tail = `","messageId":"msg-1","delta":"hello"}`
	check := func(name string) {
		t.Helper()
		b := []byte(`"` + name + tail)
		got, n := typeAt(b, 1)
		want := ParseType(name)
		if got != TypeUnknown && (got != want || n != len(name)) {
			t.Fatalf("typeAt(%q) = %v, %d; ParseType says %v", name, got, n, want)
		}
		if got == TypeUnknown && want != TypeUnknown && len(name) >= 8 {
			t.Fatalf("typeAt(%q) missed %v", name, want)
		}
	}
	for ty := Type(1); ty < numTypes; ty++ {
		name := ty.String()
		check(name)
		check(name + "_")
		check(name[:len(name)-1])
		// Every byte value at every position: some of these land in the
		// name's own typeTable slot, so each word compare is needed.
		for i := range name {
			for c := range 256 {
				check(name[:i] + string(byte(c)) + name[i+1:])
			}
		}
		// A name that goes on past a type's (ended by another stop byte,
		// or longer and in the same typeTable slot) is not that type.
		for _, c := range []string{`\`, "\x01", "\xc3\xa9"} {
			check(name + c + "X")
		}
		for found, i := 0, 0; len(name) >= 8 && found < 3 && i < 100_000; i++ {
			long := name + strings.Repeat("_", 1+i%(31-len(name))) + fmt.Sprint(i)
			if len(long) > 31 {
				continue
			}
			var w [32]byte
			copy(w[:], long)
			le := binary.LittleEndian
			if typeTable[typeSlot(le.Uint64(w[:]), le.Uint64(w[len(long)-8:]), len(long))] == ty {
				check(long)
				found++
			}
		}
		// Too few bytes after the name: left to str and ParseType.
		b := []byte(`"` + name + `"}`)
		if got, _ := typeAt(b, 1); got != TypeUnknown {
			t.Fatalf("typeAt(%q) read past its 32 bytes: %v", b, got)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "ACDEGHIKLMNOPRSTUVWXY_"
	for range 200_000 {
		var sb strings.Builder
		for range 8 + r.IntN(24) {
			sb.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		check(sb.String())
	}
}

// TestDecodeReleasesLastEvent: Decode skips Reset when the last Decode left
// nothing to release (held). After an event that leaves each kind of state
// behind, a plain event must find none of it and decode as by a fresh
// Decoder, including when the big event's buffers must be let go.
func TestDecodeReleasesLastEvent(t *testing.T) {
	const plain = `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}`
	for _, give := range []string{
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\nb"}`, // scratch
		`{"type":"TEXT_MESSAGE_END","messageId":"m","x":1}`,              // warns
		`{"messageId":"m","type":"TEXT_MESSAGE_END"}`,                    // the collect path
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, // msgs, tcs
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":"hi"}]}`,                                                                           // msgs
		`{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/a"}]}`,                                                                                                // ops
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[{"inputTokens":1}]}`,                                                                              // usage
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"}}`,                                                                             // nested
		`{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[]}}`,                                                        // nested
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat(`\n`, maxRetainBytes) + `"}`,
		`{"type":"STATE_DELTA","delta":[` + strings.Repeat(`{"op":"remove","path":"/a"},`, maxRetainItems) + `{"op":"remove","path":"/a"}]}`,
		`{` + strings.Repeat(`"messageId":"m",`, maxRetainItems) + `"type":"TEXT_MESSAGE_END"}`, // members, emptied but grown
		// Errors leave what was appended before them.
		`{"messageId":"m","type":"TEXT_MESSAGE_END","x":[}`, // members
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}},{"id":1}]}]}`, // tcs
	} {
		var d Decoder
		var ev Event
		d.Decode([]byte(give), &ev) // an error too leaves state behind
		got, gotEv := decodeResult(&d, []byte(plain))
		var fresh Decoder
		want, wantEv := decodeResult(&fresh, []byte(plain))
		if got != want || eventDiff(gotEv, wantEv) != "" {
			t.Fatalf("after %.80s: %s %s, want %s", give, got, eventDiff(gotEv, wantEv), want)
		}
		if len(d.scratch)|len(d.warns)|len(d.members)|len(d.msgs)|len(d.tcs)|len(d.ops)|len(d.usage) != 0 || d.nested ||
			d.input.Raw != nil || d.outcome.Raw != nil {
			t.Fatalf("after %.80s and a plain event the Decoder still holds the first", give)
		}
		if cap(d.scratch) > maxRetainBytes || cap(d.ops) > maxRetainItems || cap(d.members) > maxRetainItems {
			t.Fatalf("after %.80s and a plain event the Decoder keeps %d bytes, %d ops, %d members", give, cap(d.scratch), cap(d.ops), cap(d.members))
		}
	}
}

// TestMemberPatternsDecodeAlike: an event decoded by a Decoder that has
// learnt its member order (so that members1 checks each member against
// its memberPat first) decodes exactly as by a fresh Decoder, for members
// that almost match a pattern and for patterns that end early in the input
// or run past its end.
func TestMemberPatternsDecodeAlike(t *testing.T) {
	evs := []string{
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta"`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d\"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\u00e9\n"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"caf` + "\xc3\xa9" + `"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + "\xff" + `"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":1}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":null}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m" ,"delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m", "delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta" :"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta": "d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","Delta":"d","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","delta":"e"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"} `,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}x`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d",}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","metadata":{"a":1}}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","type":"TEXT_MESSAGE_END"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","role":"robot","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m","delta":"d"}`, // delta is not a property
		`{"type":"STATE_DELTA","delta":"d"}`,                      // delta is a patch here
		`{"type":"RAW","source":"s","event":1}`,
		`{"type":"RAW","event":1,"source":"s"}`,
		`{"type":"CUSTOM","name":"n","value":1}`,
		`{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"n","parentMessageId":"p","delta":"d","subagentRunId":"s"}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n","parentSubagentRunId":"p","parentToolCallId":"c","parentMessageId":"m","description":"d"}`,
		`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v","encryptedValueType":"t"}`,
	}
	for _, s := range evs {
		data := []byte(s)
		var fresh Decoder
		want, wantEv := decodeResult(&fresh, data)
		var d Decoder
		decodeResult(&d, data) // learn the member order
		for range 2 {
			got, gotEv := decodeResult(&d, data)
			if got != want {
				t.Fatalf("%s:\n got %s\nwant %s", data, got, want)
			}
			if diff := eventDiff(gotEv, wantEv); diff != "" {
				t.Fatalf("%s: %s", data, diff)
			}
		}
	}
	// Every field as the second guess, behind a first that is no plain
	// field (FieldType), for these events and a sample of the mix.
	mix := loadMix(t)
	for i := 0; i < len(mix); i += 50 {
		evs = append(evs, string(mix[i]))
	}
	for _, s := range evs {
		decodesAlikeGuessing(t, []byte(s), "second guess", func(d *Decoder) *[numTypes][numFields + 1]Field { return &d.shapes2 })
	}
	var d Decoder
	var ev Event
	d.Decode([]byte(`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v","encryptedValueType":"t"}`), &ev)
	if err := d.SetProtocolVersion("1.0"); err != nil {
		t.Fatal(err)
	}
	// A 1.0 Decoder strips encryptedValueType whatever it guessed.
	got, _ := decodeResult(&d, []byte(`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v","encryptedValueType":"t"}`))
	if !strings.Contains(got, "encryptedValueType") {
		t.Fatalf("1.0 decoder kept encryptedValueType: %q", got)
	}
}

// TestTypeFirstDecodesAlike: an event that starts with compact
// `{"type":"` (decodeEvent's word compare) decodes as the same event with
// a space after its brace, which takes the general path: same Event, same
// errors and warnings (their offsets aside).
func TestTypeFirstDecodesAlike(t *testing.T) {
	var evs [][]byte
	for _, c := range loadCorpus(t) {
		evs = append(evs, c.events...)
	}
	evs = append(evs, loadMix(t)...)
	for _, s := range []string{
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","type":"TEXT_MESSAGE_END"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","type":"TEXT_MESSAGE_CONTENT"}`,
		`{"type":"TEXT_MESSAGE_CONTENTS","messageId":"m","delta":"d"}`,
		`{"type":"THINKING_TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"} `,
		`{"type":"TEXT_MESSAGE_CONTENT"}`,
		`{"type":"RAW","event":{}}`,
	} {
		evs = append(evs, []byte(s))
	}
	// outcome is decodeResult without offsets and quotes.
	outcome := func(d *Decoder, data []byte) (string, *Event) {
		var ev Event
		err := d.Decode(data, &ev)
		var out []string
		if err != nil {
			e := err.(*Error)
			out = append(out, fmt.Sprintf("error kind=%v verdict=%v field=%q type=%v/%q detail=%q", e.Kind, e.Verdict, e.Field, e.Type, e.TypeName, e.Detail))
		}
		for _, w := range d.Warnings() {
			out = append(out, fmt.Sprintf("warning kind=%v field=%q detail=%q", w.Kind, w.Field, w.Detail))
		}
		return strings.Join(out, "\n"), &ev
	}
	var d, d2 Decoder
	n := 0
	for _, data := range evs {
		if !strings.HasPrefix(string(data), `{"type":"`) {
			continue
		}
		n++
		got, gotEv := outcome(&d, data)
		spaced := append([]byte(`{ `), data[1:]...)
		want, wantEv := outcome(&d2, spaced)
		if got != want {
			t.Fatalf("%s:\n got %s\nwant %s", data, got, want)
		}
		if diff := eventDiff(gotEv, wantEv); diff != "" {
			t.Fatalf("%s: %s", data, diff)
		}
	}
	if n < 1000 {
		t.Fatalf("only %d events start with {\"type\":\"", n)
	}
}

// TestSettledEventsNeedNoFinish: for every event that decodes and that
// settled says finish may skip, finish changes nothing: no error, no
// warning, the same Event. Every type gets an event with all its
// required fields, and the corpus and mix add the real ones.
func TestSettledEventsNeedNoFinish(t *testing.T) {
	var evs [][]byte
	for _, c := range loadCorpus(t) {
		evs = append(evs, c.events...)
	}
	evs = append(evs, loadMix(t)...)
	for ty := Type(1); ty < numTypes; ty++ {
		// A value of the wrong type for some fields is fine: those events
		// fail to decode and are skipped.
		s := `{"type":"` + ty.String() + `"`
		for f := Field(1); f < numFields; f++ {
			if ty.Required(f) {
				s += `,"` + f.String() + `":"x"`
			}
		}
		evs = append(evs, []byte(s+"}"))
	}
	settled := 0
	for _, data := range evs {
		var d Decoder
		var ev Event
		if d.Decode(data, &ev) != nil || d.retired || !d.settled(&ev, len(data)) {
			continue
		}
		settled++
		before, warns := ev, len(d.warns)
		if err := d.finish(&ev, len(data)); err != nil || len(d.warns) != warns {
			t.Fatalf("%s: settled, but finish says %v, %d new warnings", data, err, len(d.warns)-warns)
		}
		if diff := eventDiff(&ev, &before); diff != "" {
			t.Fatalf("%s: settled, but finish changed %s", data, diff)
		}
	}
	if settled < 1000 {
		t.Fatalf("only %d settled events", settled)
	}
}
