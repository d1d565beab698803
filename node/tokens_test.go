package node_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/web"
)

// getConfig fetches /config.json from addr (host:port to dial) with the
// given Host header.
func getConfig(t *testing.T, dial, host string) string {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+dial+"/config.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET config.json via %s Host %s: %d %s", dial, host, res.StatusCode, b)
	}
	return string(b)
}

// Over real HTTP, a node listening on every interface hands its
// development tokens only to a loopback peer that names a loopback host:
// not to a rebound DNS name on the loopback address, not to another
// interface's peer whatever Host it sends.
func TestDevTokensLoopbackOnly(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTP = ":0" // every interface
	cfg.DashboardTenants = []web.Tenant{{Tenant: "acme", Token: "dev-token-of-acme"}}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	_, port, _ := net.SplitHostPort(n.HTTPAddr())
	local := net.JoinHostPort("127.0.0.1", port)
	tests := []struct {
		name, dial, host string
		want             bool // the token is served
	}{
		{"127.0.0.1", local, local, true},
		{"localhost", local, "localhost:" + port, true},
		{"localhost without port", local, "localhost", true},
		{"[::1] as Host", local, "[::1]:" + port, true},
		{"rebound name", local, "attacker.example:" + port, false},
		{"rebound name without port", local, "attacker.example", false},
		{"a name under localhost's", local, "localhost.attacker.example:" + port, false},
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("::1", port)); err == nil {
		c.Close()
		tests = append(tests, struct {
			name, dial, host string
			want             bool
		}{"over ::1", net.JoinHostPort("::1", port), "[::1]:" + port, true})
	}
	if ip := nonLoopbackIP(); ip != "" {
		remote := net.JoinHostPort(ip, port)
		tests = append(tests, []struct {
			name, dial, host string
			want             bool
		}{
			{"another interface, Host localhost", remote, "localhost:" + port, false},
			{"another interface, its own address", remote, remote, false},
		}...)
	} else {
		t.Log("no non-loopback address on this machine: the remote-peer cases are covered by web's unit test only")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Contains(getConfig(t, tt.dial, tt.host), "dev-token-of-acme")
			if got != tt.want {
				t.Fatalf("token served: %v, want %v", got, tt.want)
			}
		})
	}
	// Requests written by hand on the loopback connection: what a
	// rebinding page's script can add (X-Forwarded-* are not forbidden
	// header names to fetch, and same-origin needs no preflight) does not
	// count, and in an absolute-form request line the URI's host is the
	// Host (RFC 9112 §3.2.2), whatever the Host header says.
	for _, tt := range []struct {
		name, request string
		want          bool
	}{
		{"X-Forwarded-Host localhost from a rebound name", "GET /config.json HTTP/1.1\r\nHost: attacker.example:" + port + "\r\nX-Forwarded-Host: localhost\r\nX-Forwarded-For: 127.0.0.1\r\nForwarded: for=127.0.0.1;host=localhost\r\n", false},
		{"absolute form naming a rebound name", "GET http://attacker.example:" + port + "/config.json HTTP/1.1\r\nHost: localhost:" + port + "\r\n", false},
		{"absolute form naming localhost", "GET http://localhost:" + port + "/config.json HTTP/1.1\r\nHost: localhost:" + port + "\r\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", local)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tt.request+"Connection: close\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(c)
			if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 200 ") {
				t.Fatalf("answer %q %v", b, err)
			}
			if got := strings.Contains(string(b), "dev-token-of-acme"); got != tt.want {
				t.Fatalf("token served: %v, want %v", got, tt.want)
			}
		})
	}
}

// nonLoopbackIP returns an address of this machine that is not loopback
// (IPv4 preferred), or "".
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

// A node trusting a JWKS (a file here) takes EdDSA tokens of that issuer
// on the bridge and the API, with the scopes they carry, besides HS256
// tokens of its key.
func TestNodeJWKS(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer := auth.Ed25519Signer{Key: priv, Kid: "k1"}
	doc, err := signer.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Tokens.JWKS = []auth.JWKSSource{{Issuer: "https://idp.example", File: path}}
	cfg.Tokens.Audience = "threadcast"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if n.Verifier() == nil || n.Verifier().Stats().Keys != 1 {
		t.Fatalf("verifier %v", n.Verifier())
	}
	u := n.URL()
	mint := func(scope, iss string) string {
		tok, err := signer.Mint(auth.Claims{Tenant: "acme", Issuer: iss, Audience: auth.Audience{"threadcast"}, Scope: scope, Expiry: time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	body := `{"type":"RUN_STARTED","threadId":"j1","runId":"r1"}
{"type":"RUN_FINISHED","threadId":"j1","runId":"r1"}
`
	if code, b := do(t, "POST", u+"/v1/ingest/acme/j1", mint("read", "https://idp.example"), body); code != http.StatusForbidden || !strings.Contains(b, `lacks the \"publish\" scope`) {
		t.Errorf("bridge with a read token: %d %s", code, b)
	}
	if code, b := do(t, "POST", u+"/v1/ingest/acme/j1", mint("publish", "https://other.example"), body); code != http.StatusUnauthorized {
		t.Errorf("bridge with another issuer's token: %d %s", code, b)
	}
	if code, b := do(t, "POST", u+"/v1/ingest/acme/j1", mint("publish", "https://idp.example"), body); code != http.StatusOK {
		t.Fatalf("bridge with a publish token: %d %s", code, b)
	}
	reader := mint("read", "https://idp.example")
	testsupport.WaitFor(t, 20*time.Second, "the view", func() bool {
		code, b := do(t, "GET", u+"/v1/threads/j1", reader, "")
		return code == http.StatusOK && strings.Contains(b, `"status":"finished"`)
	})
	// The shared key still works beside the JWKS, given the audience.
	hs, err := auth.Mint(testKey, auth.Claims{Tenant: "acme", Audience: auth.Audience{"threadcast"}, Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	if code, b := do(t, "GET", u+"/v1/threads/j1", hs, ""); code != http.StatusOK {
		t.Errorf("HS256 token: %d %s", code, b)
	}
	if code, b := do(t, "GET", u+"/metrics", "", ""); code != http.StatusOK || !strings.Contains(b, "threadcast_auth_jwks_keys 1") || !strings.Contains(b, "threadcast_auth_jwks_fetches_total 1") {
		t.Errorf("metrics: %d, no JWKS figures", code)
	}
}

// A node whose JWKS cannot be had does not start.
func TestNodeJWKSUnavailable(t *testing.T) {
	cfg := testConfig(t)
	cfg.Tokens.JWKS = []auth.JWKSSource{{Issuer: "i", File: filepath.Join(t.TempDir(), "missing.json")}}
	if n, err := Start(cfg); err == nil {
		n.Stop()
		t.Fatal("started without its JWKS")
	} else if !strings.Contains(err.Error(), "JWKS") {
		t.Fatalf("error %v does not name the JWKS", err)
	}
}
