package reducer

import "strings"

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
