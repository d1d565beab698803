package agent_test

import (
	"testing"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/wire"
)

// FuzzSubject pins agent.Subject to wire.EventSubject on arbitrary
// tenants and thread ids, and checks that the token decodes back to the id.
func FuzzSubject(f *testing.F) {
	for _, s := range [][2]string{{"acme", "t"}, {"acme", "a.b"}, {"x", "*"}, {"A", ">"}, {"a-", "=QQ"}, {"acme", "ünï"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tenant, thread string) {
		got, gerr := agent.Subject(tenant, thread)
		want, werr := wire.EventSubject(tenant, thread)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("Subject(%q, %q) = %q, %v; pipeline: %q, %v", tenant, thread, got, gerr, want, werr)
		}
		if gerr != nil {
			return
		}
		gotTenant, tok, err := wire.ParseEventSubject(got)
		if err != nil || gotTenant != tenant {
			t.Fatalf("%q does not parse back: %q, %v", got, gotTenant, err)
		}
		if id, err := wire.DecodeThread(tok); err != nil || id != thread {
			t.Fatalf("token %q decodes to %q, %v; want %q", tok, id, err, thread)
		}
	})
}
