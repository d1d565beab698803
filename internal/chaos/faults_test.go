package main

import (
	"slices"
	"testing"
)

// Each cycle of the schedule holds every kind once, and the same seed
// gives the same schedule; targets drawn from it are spread.
func TestSchedule(t *testing.T) {
	c := &cluster{cfg: DefaultConfig()}
	for _, seed := range []uint64{1, 5, 23, 20261202} {
		x, y := newChaos(c, nil, seed, nil), newChaos(c, nil, seed, nil)
		for cycle := range 3 {
			var got []string
			for range faultKinds {
				k := x.nextKind()
				if k != y.nextKind() {
					t.Fatalf("seed %d: two schedules of one seed differ", seed)
				}
				got = append(got, k)
			}
			slices.Sort(got)
			want := slices.Clone(faultKinds)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d cycle %d: kinds %q", seed, cycle, got)
			}
		}
		var hits [3]int
		for range 30 {
			hits[x.rng.IntN(3)]++
			_ = x.between(c.cfg.FaultMin, c.cfg.FaultMax)
		}
		for i, n := range hits {
			if n < 4 {
				t.Errorf("seed %d: target %d drawn %d times of 30 (%v)", seed, i, n, hits)
			}
		}
	}
}
