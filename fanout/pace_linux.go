//go:build linux

package fanout

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpWindow is peerWindow from Linux's TCP_INFO: tcpi_snd_wnd (the
// client's advertised window, Linux 6.2 and later) and tcpi_notsent_bytes.
type tcpWindow struct {
	rc   syscall.RawConn
	ctl  func(fd uintptr) // w.control, made once: Control takes no allocation per call
	info unix.TCPInfo
	err  syscall.Errno
	max  uint32 // the largest window seen: the client's buffer when it was empty
}

func tcpPeerWindow(tc *net.TCPConn) peerWindow {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &tcpWindow{rc: rc}
	w.ctl = w.control
	return w
}

func (w *tcpWindow) control(fd uintptr) {
	n := uint32(unsafe.Sizeof(w.info))
	_, _, w.err = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&w.info)), uintptr(unsafe.Pointer(&n)), 0)
}

func (w *tcpWindow) unread() (unread, slack int, ok bool) {
	w.info = unix.TCPInfo{}
	if err := w.rc.Control(w.ctl); err != nil || w.err != 0 {
		return 0, 0, false
	}
	if w.info.Snd_wnd == 0 && w.max == 0 {
		return 0, 0, false // a kernel that does not report the peer's window
	}
	w.max = max(w.max, w.info.Snd_wnd)
	if w.info.Snd_wnd > 0 {
		slack = int(w.info.Snd_mss)
	}
	return int(w.max-w.info.Snd_wnd) + int(w.info.Notsent_bytes), slack, true
}
