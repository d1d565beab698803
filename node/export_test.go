package node

import "net"

// Listener returns the node's HTTP listener (the connection cap), for the
// external tests.
func (n *Node) Listener() net.Listener { return n.ln }
