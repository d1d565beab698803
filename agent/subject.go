package agent

import (
	"fmt"

	"github.com/threadcast/threadcast/wire"
)

// Subject returns the subject a thread's events are published on,
// agui.<tenant>.<thread token>.events (wire.EventSubject, which ingest
// parses): the tenant must be 1 to 63 characters of [a-z0-9_-] starting with
// [a-z0-9]; the thread id (1 to 1024 bytes of UTF-8, wire.ValidThread)
// is used as is when it is made of [A-Za-z0-9_-] only, and otherwise as '='
// followed by its unpadded base64url, so that no id can add a token or a wildcard to the subject.
// Package wire imports only the standard library and nats.go, so the SDK
// stays light.
func Subject(tenant, thread string) (string, error) {
	if wire.ValidTenant(tenant) != nil {
		return "", fmt.Errorf("%w: %q", ErrBadTenant, quote([]byte(tenant)))
	}
	if err := wire.ValidThread(thread); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadThread, err)
	}
	return wire.EventSubject(tenant, thread)
}

// quote returns at most 48 bytes of b for an error message.
func quote(b []byte) string {
	const max = 48
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "…"
}
