package pipeline

import "github.com/threadcast/threadcast/history"

// nextEvent is history.NextEvent: how a stored message splits into events.
func nextEvent(data []byte) (event, rest []byte, ok bool) { return history.NextEvent(data) }
