//go:build large

package pipeline

import "testing"

// TestLargeState20MB: TestLargeEventAndState with a 20 MB state (a
// snapshot reply of about 50 MB, four windows). Tag large: run without
// -race (scripts/test.sh); the default suite runs it with an 8 MB state.
func TestLargeState20MB(t *testing.T) { checkLargeEventAndState(t, 20) }
