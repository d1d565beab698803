package node

import (
	"context"
	"fmt"

	"github.com/threadcast/threadcast/auth"
)

// startVerifier builds the node's token verifier from AuthKey and Tokens
// and, when it trusts JWKS sources, fetches them: a node whose keys cannot
// be had would refuse every token, so it does not start.
func (n *Node) startVerifier() error {
	vc := n.cfg.Tokens
	vc.SharedKeys = append([][]byte(nil), vc.SharedKeys...)
	if len(n.cfg.AuthKey) > 0 {
		vc.SharedKeys = append(vc.SharedKeys, n.cfg.AuthKey)
	}
	if vc.Logger == nil {
		vc.Logger = n.log.With("part", "auth")
	}
	v, err := auth.NewVerifier(vc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(vc.JWKS) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Drain)
		defer cancel()
		if err := v.Refresh(ctx); err != nil {
			return fmt.Errorf("%w: JWKS: %w", ErrConfig, err)
		}
	}
	n.verifier = v
	return nil
}
