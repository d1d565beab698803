package agent

import (
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
