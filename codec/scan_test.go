package codec

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// firstStop is stopAt8's definition, one byte at a time: the index of the
// first byte that ends a plain ASCII string run, or 8.
func firstStop(w [8]byte) int {
	for i, c := range w {
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
	}
	return 8
}

func stopIndex(w [8]byte) int {
	m := stopAt8(binary.LittleEndian.Uint64(w[:]))
	if m == 0 {
		return 8
	}
	return bits.TrailingZeros64(m) >> 3
}

// TestStopAt8 checks the word-at-a-time scan against the byte loop: every
// byte value at every position among plain bytes, every pair of values in
// adjacent positions (where a borrow could leak into the next byte), and
// random words.
func TestStopAt8(t *testing.T) {
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			w[pos] = byte(c)
			if got, want := stopIndex(w), firstStop(w); got != want {
				t.Fatalf("%q: stop at %d, want %d", w, got, want)
			}
		}
	}
	for a := 0; a < 256; a++ {
		for c := 0; c < 256; c++ {
			w := [8]byte{'x', 'x', 'x', byte(a), byte(c), 'x', 'x', 'x'}
			if got, want := stopIndex(w), firstStop(w); got != want {
				t.Fatalf("%q: stop at %d, want %d", w, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 1_000_000; n++ {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		if got, want := stopIndex(w), firstStop(w); got != want {
			t.Fatalf("%q: stop at %d, want %d", w, got, want)
		}
	}
}
