package codec_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/threadcast/threadcast/codec"
)

// A consumer loop: frame a stream, decode each event with one reused
// Decoder, drop what the processing model drops, stop at a fatal error.
func Example() {
	stream := strings.NewReader(`data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}

data: {"type":"TEXT_MESSAGE_START","messageId":"m","extra":1}

data: {"type":"FUTURE_EVENT"}

data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":42}

`)
	sr := codec.NewStreamReader(stream)
	var d codec.Decoder
	var ev codec.Event
	for seq := uint64(1); ; seq++ {
		data, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println("framing:", err)
			return
		}
		if err := d.Decode(data, &ev); err != nil {
			var e *codec.Error
			errors.As(err, &e)
			e.Seq = seq
			if e.Verdict == codec.Drop {
				fmt.Println("dropped:", e.Kind, e.TypeName)
				continue
			}
			fmt.Println("fatal:", e)
			return
		}
		for _, w := range d.Warnings() {
			fmt.Println("warning:", w.Kind, w.Field)
		}
		fmt.Println("event:", ev.Type) // ev is valid until the next Decode
	}
	// Output:
	// event: RUN_STARTED
	// warning: unknown property extra
	// event: TEXT_MESSAGE_START
	// dropped: unknown event type FUTURE_EVENT
	// fatal: codec: seq 4: TEXT_MESSAGE_CONTENT: delta: wrong JSON type: want string, got number (at byte 55: "42}") [fatal]
}

// Encoding appends to a caller's buffer; absent optional fields stay absent.
func ExampleAppendEvent() {
	ev := codec.Event{Type: codec.TypeTextMessageStart, MessageID: "m1"}
	fmt.Println(string(codec.AppendEvent(nil, &ev)))
	ev.Role = "user"
	ev.Fields = ev.Fields.With(codec.FieldRole)
	fmt.Println(string(codec.AppendEvent(nil, &ev)))
	// Output:
	// {"type":"TEXT_MESSAGE_START","messageId":"m1"}
	// {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"user"}
}
