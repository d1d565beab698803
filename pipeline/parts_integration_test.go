//go:build integration

package pipeline

import "testing"

// TestLargeState20MB: TestLargeEventAndState with a 20 MB state (a
// snapshot reply of about 50 MB, four windows).
func TestLargeState20MB(t *testing.T) { checkLargeEventAndState(t, 20) }
