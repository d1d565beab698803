//go:build linux || darwin

package pipeline

import "syscall"

// freeBytes returns the bytes available to an unprivileged writer on dir's
// file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:unconvert // Bsize's type differs per OS
}
