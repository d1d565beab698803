//go:build !tcpoison

package codec

// poisonEnabled reports whether recycled buffers are poisoned (build tag
// tcpoison). Off in production builds.
const poisonEnabled = false

// poison is a no-op without the tcpoison build tag.
func poison([]byte) {}
