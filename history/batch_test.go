package history

import (
	"reflect"
	"testing"
)

func TestNextEvent(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string
	}{
		{"one", `{"type":"RAW"}`, []string{`{"type":"RAW"}`}},
		{"jsonl", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}},
		{"crlf and blank lines", "\r\n{\"a\":1}\r\n\r\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}},
		{"pretty", "{\n  \"type\": \"X\",\n  \"s\": {\"a\": \"}\\\"{\"}\n}\n{\"b\":2}", []string{"{\n  \"type\": \"X\",\n  \"s\": {\"a\": \"}\\\"{\"}\n}", `{"b":2}`}},
		{"pretty nested line looks whole", "{\n \"snapshot\":\n  {\"a\": 1}\n}", []string{"{\n \"snapshot\":\n  {\"a\": 1}\n}"}},
		{"garbage line", "not json\n{\"b\":2}", []string{"not json", `{"b":2}`}},
		{"garbage lines are one piece", "a\nb\n  c\r\n\n{\"b\":2}\nd\ne", []string{"a\nb\n  c", `{"b":2}`, "d\ne"}},
		{"first line closes an inner object", "{\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"a\":1}\n}\n{\"b\":2}", []string{"{\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"a\":1}\n}", `{"b":2}`}},
		{"first line closes an object in an array", "{\"a\":[{\"b\":1}\n ,{\"c\":2}]}", []string{"{\"a\":[{\"b\":1}\n ,{\"c\":2}]}"}},
		{"whole line before garbage", "{\"a\":1}\nnot json", []string{`{"a":1}`, "not json"}},
		{"unterminated", "{\"a\":\n1", []string{"{\"a\":\n1"}},
		{"two on a line", `{"a":1}{"b":2}`, []string{`{"a":1}{"b":2}`}}, // JSONL: one per line; the decoder rejects it
		{"only space", " \n\t ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for data := []byte(tt.give); ; {
				ev, rest, ok := NextEvent(data)
				if !ok {
					break
				}
				got = append(got, string(ev))
				data = rest
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzNextEvent(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":\n2}\nx"))
	f.Fuzz(func(t *testing.T, data []byte) {
		total := 0
		for d := data; ; {
			ev, rest, ok := NextEvent(d)
			if !ok {
				break
			}
			if len(ev) == 0 || len(rest) >= len(d) {
				t.Fatalf("no progress: ev %q rest %d of %d", ev, len(rest), len(d))
			}
			total += len(ev)
			d = rest
		}
		if total > len(data) {
			t.Fatalf("events longer than the input")
		}
	})
}
