package reducer

import (
	"errors"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// TestApplyDecoded covers each outcome of a decode the fold handles: codec
// warnings, a dropped event, a malformed event (the run ends, the thread
// goes on to a new run), an error that is not a codec error, and a clean
// event.
func TestApplyDecoded(t *testing.T) {
	var d codec.Decoder
	var ev codec.Event
	th := NewThread("t")
	fold := func(seq uint64, s string) Result {
		err := d.Decode([]byte(s), &ev)
		return th.ApplyDecoded(seq, &ev, err, d.Warnings())
	}
	if res := fold(1, `{"type":"RUN_STARTED","threadId":"t","runId":"r","bogus":1}`); res.Fatal != nil || th.Warnings() != 1 {
		t.Fatalf("strip: fatal %v, %d warnings; want none, 1", res.Fatal, th.Warnings())
	}
	if res := fold(2, `{"type":"NOT_A_TYPE"}`); res.Fatal != nil || th.Warnings() != 2 || th.Seq() != 2 {
		t.Fatalf("drop: fatal %v, %d warnings, seq %d; want none, 2, 2", res.Fatal, th.Warnings(), th.Seq())
	}
	res := fold(3, `{"type":"TEXT_MESSAGE_START","messageId":7}`)
	if !errors.Is(res.Fatal, codec.ErrWrongType) || th.Status() != StatusRejected {
		t.Fatalf("malformed: fatal %v, status %v; want ErrWrongType, rejected", res.Fatal, th.Status())
	}
	if res := fold(4, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`); !errors.Is(res.Fatal, ErrRejected) {
		t.Fatalf("after the rejection: fatal %v; want ErrRejected", res.Fatal)
	}
	if res := fold(5, `{"type":"RUN_STARTED","threadId":"t","runId":"r2"}`); res.Fatal != nil || th.Status() != StatusRunning {
		t.Fatalf("new run: fatal %v, status %v; want none, running", res.Fatal, th.Status())
	}
	other := errors.New("not a codec error")
	if res := th.ApplyDecoded(6, &ev, other, nil); res.Fatal != other || th.Status() != StatusRejected {
		t.Fatalf("foreign error: fatal %v, status %v; want it, rejected", res.Fatal, th.Status())
	}
}
