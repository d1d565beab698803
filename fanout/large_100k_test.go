//go:build large

package fanout

import "testing"

// TestLongThread100k: a thread of 100,000 messages, a view of 50 MB (its
// snapshot reply about 100 MB, in thirteen parts). Tag large: run without
// -race (scripts/test.sh), under which it takes minutes and its timeouts
// fire on a small machine; the same paths run under -race on 10,000
// messages in the default suite.
func TestLongThread100k(t *testing.T) { checkLongThread(t, 100000, 510, 50<<20) }
