package node_test

// The tests of this package start whole nodes, ingest side included; they
// are an external test package because node/ingestrole imports node. This
// file gives them the node's API by its own names, with the ingest role's
// configuration beside the node's in one Config, as the commands set them.

import (
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
)

// Config is a node's Config and its ingest side's, set side by side.
type Config struct {
	node.Config
	roleConfig
}

type roleConfig = ingestrole.Config

// Node is a running node.
type Node = node.Node

func DefaultConfig() Config {
	return Config{node.DefaultConfig(), ingestrole.DefaultConfig()}
}

// node is c's node.Config with the ingest side plugged in.
func (c Config) node() node.Config {
	nc := c.Config
	nc.IngestRole = c.roleConfig
	return nc
}

func Start(c Config) (*Node, error) { return node.Start(c.node()) }

// side returns n's ingest side.
func side(n *Node) *ingestrole.Side { return n.IngestSide().(*ingestrole.Side) }

var (
	ErrConfig      = node.ErrConfig
	ErrDataDir     = node.ErrDataDir
	ErrNatsListen  = node.ErrNatsListen
	ErrHTTPListen  = node.ErrHTTPListen
	ErrNats        = node.ErrNats
	ErrNkey        = node.ErrNkey
	ErrCalloutSeed = node.ErrCalloutSeed
)

const KeyFile = node.KeyFile

func LoadOrCreateKey(path string) ([]byte, bool, error) { return node.LoadOrCreateKey(path) }

// maxEventBytes is the largest event n's ingest accepts.
func maxEventBytes(n *Node) int {
	pc := side(n).Config().Pipeline
	return pc.MaxEventBytes()
}
