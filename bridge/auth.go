package bridge

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/threadcast/threadcast/auth"
)

// ErrNoToken is returned by a TokenVerifier for a request without a bearer
// token (401).
var ErrNoToken = errors.New("bridge: no bearer token")

// Verifier returns a Config.Verify that admits a request whose
// bearer token (package auth: the Authorization header or access_token)
// v verifies, grants auth.ScopePublish, names the tenant of the URL and
// covers its thread (r.PathValue("thread"), set by the bridge's routing).
// A token v refuses is a 401 (the error wraps auth's); a valid token
// without the publish scope, of another tenant, or whose thread patterns
// do not cover the thread, is ErrForbidden (403): a subscriber's read-only
// token, handed to a browser, must not write, and a token limited to some
// threads must not write into the others. The function is safe for
// concurrent use.
func Verifier(v *auth.Verifier) func(r *http.Request, tenant string) error {
	return func(r *http.Request, tenant string) error {
		tok, ok := auth.FromRequest(r)
		if !ok {
			return ErrNoToken
		}
		c, err := v.Verify(r.Context(), tok)
		if err != nil {
			return err
		}
		if !c.Can(auth.ScopePublish) {
			return fmt.Errorf("%w: token lacks the %q scope", ErrForbidden, auth.ScopePublish)
		}
		if c.Tenant != tenant {
			return fmt.Errorf("%w: token is for another tenant", ErrForbidden)
		}
		if !c.AllowsThread(r.PathValue("thread")) {
			return fmt.Errorf("%w: token does not cover the thread", ErrForbidden)
		}
		return nil
	}
}

// TokenVerifier is Verifier with a Verifier holding the one HS256
// key (no clock skew, the clock now; nil means time.Now). With a key
// shorter than auth.MinKeyLen every request is refused with
// auth.ErrShortKey (401).
func TokenVerifier(key []byte, now func() time.Time) func(r *http.Request, tenant string) error {
	v, err := auth.NewVerifier(auth.VerifierConfig{SharedKeys: [][]byte{key}, Now: now})
	if err != nil {
		return func(*http.Request, string) error { return err }
	}
	return Verifier(v)
}
