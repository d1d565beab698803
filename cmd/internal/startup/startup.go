// Package startup is what the commands that run a node (cmd/ingest,
// cmd/fanout) share around node.Run: the flag a start-up error is about.
package startup

import (
	"errors"
	"fmt"

	"github.com/threadcast/threadcast/node"
)

// flagOf names the flag at fault for each start-up error of package node
// that one flag alone configures.
var flagOf = []struct {
	err  error
	flag string
}{
	{node.ErrNkey, "--nats-nkey"},
	{node.ErrCalloutSeed, "--nats-callout-seed"},
	{node.ErrHTTPListen, "--http"},
	{node.ErrNatsListen, "--nats-listen"},
	{node.ErrDataDir, "--data"},
}

// NameFlag prefixes err with the flag it is about (unchanged when no flag
// alone is): "--nats-nkey: node: NATS nkey seed: …".
func NameFlag(err error) error {
	for _, f := range flagOf {
		if errors.Is(err, f.err) {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	return err
}
