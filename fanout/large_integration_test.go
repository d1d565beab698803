//go:build integration

package fanout

import "testing"

// TestLongThread100k: a thread of 100,000 messages, a view of 50 MB (its
// snapshot reply about 100 MB, in thirteen parts). Over a minute under
// -race on a small machine, hence the integration tag.
func TestLongThread100k(t *testing.T) { checkLongThread(t, 100000, 510, 50<<20) }
