package agent

// DropNextAcks makes the Publisher treat its next n JetStream acks as lost
// (ack timeouts), so tests can drive the retry path against a real server:
// the message is stored, the ack never "arrives", and the retry carries the
// same Nats-Msg-Id.
func (p *Publisher) DropNextAcks(n int32) { p.testDropAcks.Store(n) }

// Retryable exposes retryable to the tests of which failures are re-sent.
var Retryable = retryable
