package pipeline

import "github.com/threadcast/threadcast/wire"

// tokenSafe reports whether s can be used verbatim as a subject token.
func tokenSafe(s string) bool { return wire.IsToken(s) }

// truncate shortens a hostile input quoted in an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
