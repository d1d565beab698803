package agent

import (
	"encoding/base64"
	"fmt"
)

// This file repeats, on purpose, the few lines of pipeline/subjects.go that a
// publisher needs. pipeline links the whole nats-server (it embeds one), and
// an agent SDK must stay light; pipeline in turn imports agent for the HTTP
// bridge. TestSubjectMatchesPipeline pins the two to the same output on
// hostile ids, so they cannot drift apart silently.

const (
	maxTenantLen   = 63   // pipeline.MaxTenantLen
	maxThreadIDLen = 1024 // pipeline.MaxThreadIDLen
)

// Subject returns the subject a thread's events are published on,
// agui.<tenant>.<thread token>.events, exactly as pipeline.EventSubject does:
// the tenant must be 1 to 63 characters of [a-z0-9_-] starting with [a-z0-9];
// the thread id (at most 1024 bytes) is used as is when it is made of
// [A-Za-z0-9_-] only, and otherwise as '=' followed by its unpadded base64url,
// so that no id can add a token or a wildcard to the subject.
func Subject(tenant, thread string) (string, error) {
	if !validTenant(tenant) {
		return "", fmt.Errorf("%w: %q", ErrBadTenant, quote([]byte(tenant)))
	}
	if len(thread) > maxThreadIDLen {
		return "", fmt.Errorf("%w: %d bytes (max %d)", ErrBadThread, len(thread), maxThreadIDLen)
	}
	return "agui." + tenant + "." + threadToken(thread) + ".events", nil
}

func validTenant(s string) bool {
	if len(s) == 0 || len(s) > maxTenantLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-')) {
			return false
		}
	}
	return true
}

func threadToken(id string) string {
	safe := len(id) > 0
	for i := 0; i < len(id) && safe; i++ {
		c := id[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if safe {
		return id
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// quote returns at most 48 bytes of b for an error message.
func quote(b []byte) string {
	const max = 48
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "…"
}
