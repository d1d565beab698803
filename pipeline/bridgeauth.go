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
// is signed with key, unexpired at now(), and names the tenant of the URL;
// a valid token of another tenant is ErrForbidden (403). The thread
// patterns of a token are not consulted: they limit what a subscriber may
// read, and the bridge only writes. now nil means time.Now. The function is
// safe for concurrent use.
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
		if c.Tenant != tenant {
			return fmt.Errorf("%w: token is for another tenant", ErrForbidden)
		}
		return nil
	}
}
