// Package sockopt holds socket options set on a connection before it is
// made.
package sockopt

import (
	"net"
	"syscall"
)

// RecvBufferDialer returns a Dialer whose connections have a kernel receive
// buffer of n bytes (SO_RCVBUF), set before they connect, as a client's own
// buffer is: the window announced in the handshake then fits it.
func RecvBufferDialer(n int) *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}); err != nil {
			return err
		}
		return serr
	}}
}
