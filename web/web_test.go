package web_test

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/web"
)

func serve(t *testing.T, cfg web.Config, method, path string) *http.Response {
	t.Helper()
	h, err := web.Handler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestHandlerServes(t *testing.T) {
	tests := []struct {
		name       string
		givePath   string
		wantStatus int
		wantType   string
		wantBody   string
	}{
		{"page", "/", 200, "text/html", `<script type="module" src="app.js">`},
		{"controller", "/app.js", 200, "text/javascript", "EventSource"},
		{"applier", "/viewdoc.js", 200, "text/javascript", "ResyncNeeded"},
		{"styles", "/app.css", 200, "text/css", ".msg"},
		{"config", "/config.json", 200, "application/json", `"tenants":[{"tenant":"acme","token":"tok"}]`},
		{"missing", "/nope.js", 404, "", ""},
		{"test driver is not served", "/testdata/replay.mjs", 404, "", ""},
	}
	cfg := web.Config{Tenants: []web.Tenant{{Tenant: "acme", Token: "tok"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := serve(t, cfg, "GET", tt.givePath)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if !strings.HasPrefix(res.Header.Get("Content-Type"), tt.wantType) {
				t.Errorf("Content-Type %q, want %q", res.Header.Get("Content-Type"), tt.wantType)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body lacks %q", tt.wantBody)
			}
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("CSP %q", csp)
			}
			if res.Header.Get("Referrer-Policy") != "no-referrer" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("headers %v", res.Header)
			}
		})
	}
}

func TestHandlerConfig(t *testing.T) {
	tests := []struct {
		name        string
		give        web.Config
		wantConfig  string
		wantConnect string
	}{
		{"zero", web.Config{}, `{"tenants":[],"api":"","metrics":"/metrics"}`, "connect-src 'self';"},
		{"api origin", web.Config{API: "https://fanout.example.com/"}, `{"tenants":[],"api":"https://fanout.example.com","metrics":"https://fanout.example.com/metrics"}`, "connect-src 'self' https://fanout.example.com;"},
		{"no metrics", web.Config{Metrics: "-"}, `{"tenants":[],"api":"","metrics":"-"}`, "connect-src 'self';"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := serve(t, tt.give, "GET", "/config.json")
			body, _ := io.ReadAll(res.Body)
			if string(body) != tt.wantConfig {
				t.Errorf("config %s, want %s", body, tt.wantConfig)
			}
			if res.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q: tokens must not be cached", res.Header.Get("Cache-Control"))
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, tt.wantConnect) {
				t.Errorf("CSP %q lacks %q", csp, tt.wantConnect)
			}
		})
	}
}

func TestHandlerErrors(t *testing.T) {
	tests := []struct {
		name string
		give web.Config
	}{
		{"api with path", web.Config{API: "https://x.example.com/api"}},
		{"api not http", web.Config{API: "javascript:alert(1)"}},
		{"api without host", web.Config{API: "https://"}},
		{"tenant without token", web.Config{Tenants: []web.Tenant{{Tenant: "acme"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := web.Handler(tt.give); !errors.Is(err, web.ErrConfig) {
				t.Fatalf("err %v, want ErrConfig", err)
			}
		})
	}
	res := serve(t, web.Config{}, "POST", "/")
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
}

// TestNoMarkupFromData enforces the rendering rule on the shipped scripts:
// nothing parses strings as HTML or code, so model output can only ever be
// text. (dom.js is the one place that builds elements.)
func TestNoMarkupFromData(t *testing.T) {
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(['"]on|\.src\s*=|srcdoc`)
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	files := 0
	err := fs.WalkDir(web.Static(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		files++
		b, err := fs.ReadFile(web.Static(), p)
		if err != nil {
			return err
		}
		if m := banned.Find(b); m != nil {
			t.Errorf("%s uses %q", p, m)
		}
		for _, m := range imports.FindAllSubmatch(b, -1) {
			if _, err := fs.Stat(web.Static(), string(m[1])); err != nil {
				t.Errorf("%s imports %s, which is not embedded", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("only %d scripts embedded", files)
	}
}

// Development tokens are handed only to visitors on this machine when
// TenantsLocalOnly is set; without it, to everyone (the documented default).
func TestHandlerTenantsLocalOnly(t *testing.T) {
	withTokens := `{"tenants":[{"tenant":"acme","token":"tok"}],"api":"","metrics":"/metrics"}`
	without := `{"tenants":[],"api":"","metrics":"/metrics"}`
	tests := []struct {
		name      string
		localOnly bool
		give      string // RemoteAddr
		host      string // Host header ("": localhost:8080)
		want      string
	}{
		{"loopback v4", true, "127.0.0.1:5000", "", withTokens},
		{"loopback v6", true, "[::1]:5000", "", withTokens},
		{"v4-mapped loopback", true, "[::ffff:127.0.0.1]:5000", "", withTokens},
		{"other host", true, "192.0.2.1:5000", "", without},
		{"private network", true, "10.1.2.3:5000", "", without},
		{"unparsable address", true, "somewhere", "", without},
		{"not local-only", false, "192.0.2.1:5000", "", withTokens},
		{"not local-only, any Host", false, "192.0.2.1:5000", "evil.example", withTokens},
		// DNS rebinding: a loopback peer, but the Host of a foreign page.
		{"rebound name", true, "127.0.0.1:5000", "evil.example:8080", without},
		{"rebound name, no port", true, "127.0.0.1:5000", "evil.example", without},
		{"localhost.evil.example", true, "127.0.0.1:5000", "localhost.evil.example", without},
		{"127.0.0.1.nip.io", true, "127.0.0.1:5000", "127.0.0.1.nip.io:8080", without},
		{"private address as Host", true, "127.0.0.1:5000", "192.168.1.2:8080", without},
		{"empty Host", true, "127.0.0.1:5000", "-", without},
		{"Host 127.0.0.1", true, "127.0.0.1:5000", "127.0.0.1:8080", withTokens},
		{"Host 127.0.0.2", true, "127.0.0.1:5000", "127.0.0.2", withTokens},
		{"Host [::1]", true, "[::1]:5000", "[::1]:8080", withTokens},
		{"Host [::1] without port", true, "[::1]:5000", "[::1]", withTokens},
		{"Host LOCALHOST.", true, "127.0.0.1:5000", "LOCALHOST.:8080", withTokens},
		{"Host localhost, remote peer", true, "192.0.2.1:5000", "localhost:8080", without},
		// Spellings a resolver may read as loopback but a browser would send
		// only for a name it resolved: refused (shorthand and hex IPv4 are
		// not addresses to netip, and a rebinding page cannot name them).
		{"Host 127.1", true, "127.0.0.1:5000", "127.1:8080", without},
		{"Host 0x7f.1", true, "127.0.0.1:5000", "0x7f.1", without},
		{"Host 0177.0.0.1", true, "127.0.0.1:5000", "0177.0.0.1", without},
		{"Host 2130706433", true, "127.0.0.1:5000", "2130706433", without},
		{"Host [::ffff:127.0.0.1]", true, "127.0.0.1:5000", "[::ffff:127.0.0.1]:8080", withTokens},
		{"Host [::ffff:192.0.2.1]", true, "127.0.0.1:5000", "[::ffff:192.0.2.1]:8080", without},
		{"Host [fe80::1%lo]", true, "[::1]:5000", "[fe80::1%25lo]:8080", without},
		{"Host LOCALHOST", true, "127.0.0.1:5000", "LOCALHOST", withTokens},
		{"Host localhost..", true, "127.0.0.1:5000", "localhost..", without},
		{"Host with a second port", true, "127.0.0.1:5000", "localhost:8080:1", without},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := web.Handler(web.Config{Tenants: []web.Tenant{{Tenant: "acme", Token: "tok"}}, TenantsLocalOnly: tt.localOnly})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/config.json", nil)
			req.RemoteAddr = tt.give
			switch tt.host {
			case "":
				req.Host = "localhost:8080"
			case "-":
				req.Host = ""
			default:
				req.Host = tt.host
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("config %s, want %s", got, tt.want)
			}
		})
	}
}
