package agent_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/agent"
)

func TestTokenAuth(t *testing.T) {
	if _, err := agent.TokenAuth("Bad.Tenant", func() string { return "t" }); !errors.Is(err, agent.ErrBadTenant) {
		t.Errorf("bad tenant: %v, want ErrBadTenant", err)
	}
	opts, err := agent.TokenAuth("acme", func() string { return "tok" })
	if err != nil {
		t.Fatal(err)
	}
	var o nats.Options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.InboxPrefix != "_INBOX_acme" || o.TokenHandler == nil || o.TokenHandler() != "tok" {
		t.Errorf("inbox %q, token handler %v", o.InboxPrefix, o.TokenHandler != nil)
	}
}
