package pipeline

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/threadcast/threadcast/auth"
)

// ErrNoToken is returned by a TokenVerifier for a request without a bearer
// token (401).
var ErrNoToken = errors.New("pipeline: no bearer token")

// TokenVerifier returns a BridgeConfig.Verify that admits a request whose
// bearer token (package auth: the Authorization header or access_token)
// is signed with key, unexpired at now(), grants auth.ScopePublish, names
// the tenant of the URL and covers its thread (r.PathValue("thread"), set by the bridge's routing);
// a valid token without the publish scope, of another tenant, or whose
// thread patterns do not cover the thread, is ErrForbidden (403): a
// subscriber's read-only token, handed to a browser, must not write. Why the patterns count: a token
// limited to some threads is typically handed to a browser to read them;
// letting it write events into every other thread of its tenant would make
// the narrowest token as strong as the widest. now nil means time.Now. The
// function is safe for concurrent use.
func TokenVerifier(key []byte, now func() time.Time) func(r *http.Request, tenant string) error {
	if now == nil {
		now = time.Now
	}
	return func(r *http.Request, tenant string) error {
		tok, ok := auth.FromRequest(r)
		if !ok {
			return ErrNoToken
		}
		c, err := auth.Verify(key, tok, now())
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
