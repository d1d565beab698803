//go:build !(linux || darwin)

package pipeline

// freeBytes is not implemented here: only reported refusals count.
func freeBytes(string) (uint64, error) { return 0, errNoStatfs }
