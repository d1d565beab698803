package node

import (
	"testing"
	"time"
)

func TestReconnectDelay(t *testing.T) {
	tests := []struct {
		give     int
		min, max time.Duration
	}{
		{0, 250 * time.Millisecond, 312500 * time.Microsecond},
		{1, 250 * time.Millisecond, 312500 * time.Microsecond},
		{3, time.Second, 1250 * time.Millisecond},
		{5, 4 * time.Second, 5 * time.Second},
		{1000, 4 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		for range 20 {
			if d := reconnectDelay(tt.give); d < tt.min || d > tt.max {
				t.Errorf("reconnectDelay(%d) = %v, want in [%v, %v]", tt.give, d, tt.min, tt.max)
			}
		}
	}
}
