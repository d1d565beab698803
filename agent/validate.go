package agent

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/threadcast/threadcast/codec"
)

// decoders recycles codec.Decoders across Publish calls: a Decoder keeps its
// scratch buffers, and Publish is called from any number of goroutines, each
// needing its own (BenchmarkValidate: pooled vs a fresh Decoder per event).
var decoders = sync.Pool{New: func() any { return new(codec.Decoder) }}

// ValidateEvent reports whether event is one valid AG-UI event (1.0, or 1.1:
// the codec's default): the error, if any, is the codec's *codec.Error
// (verdict Fatal or Drop; an event the codec would only strip, translate or
// warn about is valid, a retired THINKING_* event among them). It keeps no reference
// to event, and is safe for concurrent use.
func ValidateEvent(event []byte) error {
	d := decoders.Get().(*codec.Decoder)
	var ev codec.Event
	err := d.Decode(event, &ev)
	// Reset drops the Decoder's views into event before it goes back.
	d.Reset()
	decoders.Put(d)
	return err
}

// otherThread returns ErrOtherThread when event, published to thread, names
// another thread in its threadId or its RUN_STARTED.input.threadId. The
// subject names the thread; an event that says otherwise was sent to the
// wrong one. Only RUN_STARTED and RUN_FINISHED carry a threadId, so an
// event whose bytes hold neither the key nor an escape (which could spell
// it) is passed without decoding; an event that does not decode is left to
// the validator.
func otherThread(thread string, event []byte) error {
	if !bytes.Contains(event, threadIDKey) && bytes.IndexByte(event, '\\') < 0 {
		return nil
	}
	d := decoders.Get().(*codec.Decoder)
	var ev codec.Event
	var err error
	if d.Decode(event, &ev) == nil {
		switch {
		case ev.Has(codec.FieldThreadID) && ev.ThreadID != thread:
			err = fmt.Errorf("%w: threadId %q, published to thread %q", ErrOtherThread, quote([]byte(ev.ThreadID)), quote([]byte(thread)))
		case ev.Input != nil && ev.Input.ThreadID != thread:
			err = fmt.Errorf("%w: input.threadId %q, published to thread %q", ErrOtherThread, quote([]byte(ev.Input.ThreadID)), quote([]byte(thread)))
		}
	}
	d.Reset()
	decoders.Put(d)
	return err
}

var threadIDKey = []byte(`"threadId"`)
