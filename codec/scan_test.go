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

// TestStrEndMatchesScanString: skip's string scan (strEnd) ends every
// string where scanString does, with the same error, for strings of every
// length up to 40 with a stop byte of each kind at each position, and cut
// off at each length.
func TestStrEndMatchesScanString(t *testing.T) {
	stops := []string{`"`, `\`, `\n`, `\u00e9`, `\x`, "\x01", "\xc3\xa9", "\xff", "\xe2\x82"}
	for n := 0; n <= 40; n++ {
		for at := 0; at <= n; at++ {
			for _, stop := range stops {
				body := make([]byte, 0, n+8)
				for i := 0; i < n; i++ {
					if i == at {
						body = append(body, stop...)
					}
					body = append(body, 'a'+byte(i%26))
				}
				full := append(append([]byte(`"`), body...), `"}`...)
				for cut := 1; cut <= len(full); cut++ {
					d := Decoder{data: full[:cut]}
					wantEnd, _, wantErr := d.scanString(0)
					gotEnd, gotErr := d.strEnd(0)
					if gotEnd != wantEnd || (gotErr == nil) != (wantErr == nil) ||
						gotErr != nil && (gotErr.Detail != wantErr.Detail || gotErr.Offset != wantErr.Offset) {
						t.Fatalf("%q: strEnd = %d, %v; scanString = %d, %v", full[:cut], gotEnd, gotErr, wantEnd, wantErr)
					}
				}
			}
		}
	}
}
