//go:build !linux

package fanout

import "net"

// tcpPeerWindow is nil where the kernel's TCP_INFO does not report the
// client's window: streams are not paced (pace.go).
func tcpPeerWindow(*net.TCPConn) peerWindow { return nil }
