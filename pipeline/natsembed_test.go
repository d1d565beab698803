package pipeline

import (
	"testing"

	"github.com/threadcast/threadcast/natsembed"
)

// TestDefaultEventFitsEmbeddedServer: the largest event the stream accepts
// by default fits in one message of an embedded server with its default
// max payload.
func TestDefaultEventFitsEmbeddedServer(t *testing.T) {
	if DefaultMaxMsgSize > natsembed.DefaultMaxPayload {
		t.Fatalf("DefaultMaxMsgSize %d > natsembed.DefaultMaxPayload %d", DefaultMaxMsgSize, natsembed.DefaultMaxPayload)
	}
}
