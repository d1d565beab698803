package pipeline

import "encoding/json"

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // escapes exactly as JSON requires; never fails for a string
	return append(dst, b...)
}
