package auth

import "strings"

// The scopes a token may carry in Claims.Scope.
const (
	// ScopeRead lets the bearer read its tenant's threads (subscriber API).
	ScopeRead = "read"
	// ScopePublish lets the bearer publish its tenant's events (the ingest
	// HTTP bridge, and NATS when the bus authorizes by token).
	ScopePublish = "publish"
)

// Can reports whether the claims grant scope. An empty Scope grants
// ScopeRead and nothing else.
func (c *Claims) Can(scope string) bool {
	if scope == "" {
		return false
	}
	if c.Scope == "" {
		return scope == ScopeRead
	}
	for s := c.Scope; s != ""; {
		var f string
		f, s, _ = strings.Cut(s, " ")
		if f == scope {
			return true
		}
	}
	return false
}
