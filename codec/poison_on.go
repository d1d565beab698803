//go:build tcpoison

package codec

// poisonEnabled reports whether recycled buffers are poisoned (build tag
// tcpoison): tests of this package and its users run with it so that a view
// held past "the next Decode or Reset of the Decoder" reads as '#' bytes and
// fails loudly instead of silently showing stale data.
const poisonEnabled = true

// poison fills b with '#' before the buffer is reused.
func poison(b []byte) {
	for i := range b {
		b[i] = '#'
	}
}
