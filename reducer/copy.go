package reducer

import (
	"strings"

	"github.com/threadcast/threadcast/jsondoc"
)

// retain copies a string view taken from an event (valid only until Apply
// returns) so that it can be stored in the Thread. It is the one place where
// the reducer copies strings it keeps (STYLE practice 4): lookups use the view,
// inserts go through retain. The empty string needs no copy.
func retain(s string) string {
	if s == "" {
		return ""
	}
	return strings.Clone(s)
}

// retainBytes is retain for raw JSON values (metadata, results, outcomes,
// content parts). A nil input stays nil: nil means absent throughout.
func retainBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// retainJSON is retainBytes for a JSON value from the wire, which it also
// compacts (drops whitespace outside strings), so that the view's bytes do not
// depend on how a producer formatted its JSON. The codec has validated raw.
func retainJSON(raw []byte) []byte {
	if raw == nil {
		return nil
	}
	return compactInto(make([]byte, 0, len(raw)), raw)
}

// compactInto appends raw without the whitespace outside its strings
// (jsondoc.AppendCompact). The codec has validated raw, so AppendCompact
// accepts it; were it ever refused, raw is kept as it came.
func compactInto(out, raw []byte) []byte {
	if c, ok := jsondoc.AppendCompact(out, raw); ok {
		return c
	}
	return append(out, raw...)
}
