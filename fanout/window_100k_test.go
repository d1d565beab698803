//go:build large

package fanout

import "testing"

// TestWindowedJoins100k is TestWindowedJoins on a thread of 100,000
// messages. Tag large: run without -race (scripts/test.sh), under which it
// takes minutes on a small machine; TestWindowedJoins runs the same under
// -race on 10,000.
func TestWindowedJoins100k(t *testing.T) { windowedJoins(t, 100_000) }
