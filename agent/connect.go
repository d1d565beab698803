package agent

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/wire"
)

// TokenAuth returns the options an agent of tenant connects to NATS with
// when the bus authorizes agents by token (Threadcast's auth callout, as
// the embedded server of `threadcast serve` does): token, asked for at
// every connect and reconnect so that a long-lived agent can present a
// fresh one, and the tenant's inbox prefix (wire.InboxPrefix), the only
// subjects such a connection may receive on — the Publisher's JetStream
// acks arrive there. The token must grant the publish scope; the
// connection may publish only tenant's events. Pass the options to
// nats.Connect, then New.
func TokenAuth(tenant string, token func() string) ([]nats.Option, error) {
	inbox, err := wire.InboxPrefix(tenant)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrBadTenant, quote([]byte(tenant)))
	}
	return []nats.Option{nats.TokenHandler(token), nats.CustomInboxPrefix(inbox)}, nil
}
