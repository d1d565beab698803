package reducer_test

import (
	"fmt"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
)

// A pipeline decodes each event with the codec, counts the codec's warnings
// and fatal verdicts into the Thread, and applies the rest.
func Example() {
	stream := []string{
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"Hello"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","delta":", world"}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/greeted","value":true}]}`,
		`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`,
	}
	thr := reducer.NewThread("t1")
	var dec codec.Decoder
	var ev codec.Event
	for i, line := range stream {
		seq := uint64(i + 1)
		err := dec.Decode([]byte(line), &ev)
		for _, w := range dec.Warnings() {
			thr.Warn(seq, reducer.CodecWarning(seq, w))
		}
		if err != nil {
			thr.Reject(seq, err)
			continue
		}
		if res := thr.Apply(seq, &ev); res.Fatal != nil {
			fmt.Println("rejected:", res.Fatal)
		}
	}
	fmt.Println(thr.Status(), thr.Seq())
	fmt.Println(string(thr.AppendMessages(nil)))
	fmt.Println(string(thr.AppendState(nil)))
	// Output:
	// finished 5
	// [{"id":"m1","role":"assistant","content":"Hello, world"}]
	// {"greeted":true}
}
