//go:build integration

package fanout

import "testing"

// TestWindowedJoins100k is TestWindowedJoins on a thread of 100,000
// messages: minutes under -race on a small machine, hence the integration
// tag.
func TestWindowedJoins100k(t *testing.T) { windowedJoins(t, 100_000) }
