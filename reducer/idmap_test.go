package reducer

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestIDMapAgainstMap drives an idMap and a Go map with the same random
// operations, across the switch from slices to a map and back through
// clear, and compares them after every step.
func TestIDMapAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var got idMap[int]
		want := map[string]int{}
		keys := 2 + rng.IntN(3*smallIDs)
		for op := 0; op < 300; op++ {
			k := "id-" + strconv.Itoa(rng.IntN(keys))
			switch r := rng.IntN(10); {
			case r < 5:
				got.put(k, op)
				want[k] = op
			case r < 8:
				got.del(k)
				delete(want, k)
			case r < 9:
				v, ok := got.get(k)
				w, wok := want[k]
				if v != w || ok != wok {
					t.Fatalf("round %d op %d: get(%s) = %d, %v; want %d, %v", round, op, k, v, ok, w, wok)
				}
			default:
				if rng.IntN(10) == 0 {
					got.clear()
					clear(want)
				}
			}
			if got.len() != len(want) {
				t.Fatalf("round %d op %d: len %d, want %d", round, op, got.len(), len(want))
			}
			if all := maps.Collect(got.all()); !maps.Equal(all, want) {
				t.Fatalf("round %d op %d: entries %v, want %v", round, op, all, want)
			}
			if _, ok := want[k]; got.has(k) != ok {
				t.Fatalf("round %d op %d: has(%s) disagrees", round, op, k)
			}
		}
	}
}

// TestIDMapAllStops checks that all honours an early break in both
// representations.
func TestIDMapAllStops(t *testing.T) {
	for _, n := range []int{smallIDs, 4 * smallIDs} {
		var s idSet
		for i := 0; i < n; i++ {
			s.put(strconv.Itoa(i), struct{}{})
		}
		seen := 0
		for range s.all() {
			seen++
			if seen == 2 {
				break
			}
		}
		if seen != 2 {
			t.Errorf("n=%d: iterated %d entries after break at 2", n, seen)
		}
	}
}
