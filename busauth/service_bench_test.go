package busauth_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/auth"
)

// BenchmarkConnect: what the callout costs a connection. "token" connects
// an agent through the callout (a request to the service, an HS256
// verification, a signed user JWT); "nkey" is the baseline in the same
// server, a service user the server authorizes alone.
func BenchmarkConnect(b *testing.B) {
	l := startLockedStream(b, false)
	tok := mint(b, auth.Claims{Tenant: "acme", Scope: auth.ScopePublish})
	b.Run("token", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			nc, err := l.agent("acme", tok)
			if err != nil {
				b.Fatal(err)
			}
			nc.Close()
		}
	})
	b.Run("nkey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			nc, err := nats.Connect(l.srv.ClientURL(), l.svcAuth, nats.MaxReconnects(0))
			if err != nil {
				b.Fatal(err)
			}
			nc.Close()
		}
	})
}

// BenchmarkPublish: a publish on an agent's connection, whose permissions
// the server checks, against a service connection's (no permissions), in
// the same server: core publishes to the tenant's event subject (no stream
// stores it, so the server's permission check is most of the difference),
// flushed every 1024.
func BenchmarkPublish(b *testing.B) {
	l := startLockedStream(b, false)
	tok := mint(b, auth.Claims{Tenant: "acme", Scope: auth.ScopePublish})
	ag, err := l.agent("acme", tok)
	if err != nil {
		b.Fatal(err)
	}
	defer ag.Close()
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}`)
	for _, c := range []struct {
		name string
		nc   *nats.Conn
	}{{"agent", ag}, {"service", l.svc}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			i := 0
			for b.Loop() {
				if err := c.nc.Publish("agui.acme.bench.events", data); err != nil {
					b.Fatal(err)
				}
				if i++; i%1024 == 0 {
					if err := c.nc.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := c.nc.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
