package compact

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// FuzzCompact checks the invariant on arbitrary streams: whatever the codec
// accepts, compacting it must not change the view (valid or not, clean or
// not: warnings, rejections and the events after them included). Seeds are
// the rule tests' streams and the corpus.
func FuzzCompact(f *testing.F) {
	for _, c := range loadConformance(f) {
		if c.input != nil {
			continue
		}
		var b []byte
		for _, ev := range c.events {
			b = append(b, encodeJSONL([]*codec.Event{ev}, 1)...)
		}
		f.Add(b)
	}
	f.Add([]byte(rs + "\n" +
		`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}` + "\n" +
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}` + "\n" +
		`{"type":"TEXT_MESSAGE_END","messageId":"m"}` + "\n" +
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"x","subagentRunId":"s2"}` + "\n" +
		`{"type":"TEXT_MESSAGE_CHUNK","delta":"y"}` + "\n" +
		`{"type":"STATE_SNAPSHOT","snapshot":{"n":[1]}}` + "\n" +
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/n/-","value":2}]}` + "\n" + rf))
	f.Fuzz(func(t *testing.T, data []byte) {
		var raws [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			if json.Valid(l) {
				raws = append(raws, l)
			}
		}
		events := decodeEvents(t, raws)
		if len(events) > 200 {
			events = events[:200]
		}
		checkEquivalent(t, "fuzz", nil, events, Events(events))
	})
}
