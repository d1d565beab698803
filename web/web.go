package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

//go:embed static/*.html static/*.css static/*.js
var files embed.FS

// Static returns the dashboard's files (index.html, app.js, ...), for
// callers that serve them another way.
func Static() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic("web: BUG: embedded static directory missing: " + err.Error())
	}
	return sub
}

// Tenant is one entry of the dashboard's tenant picker: a tenant and a
// subscriber token for it.
type Tenant struct {
	Tenant string `json:"tenant"`
	Token  string `json:"token"`
}

// Config configures Handler. The zero value serves a dashboard that asks
// for a token and talks to the fanout API on its own origin.
type Config struct {
	// Tenants are offered in the tenant picker, with their tokens. They are
	// handed to every visitor of the page (config.json), so set them only
	// where that is intended: a development instance (cmd/threadcast in
	// embedded mode). Empty: the visitor pastes a token (or opens the page
	// as .../#token=<token>).
	Tenants []Tenant
	// TenantsLocalOnly offers Tenants (and so their tokens) only to
	// requests that both come from a loopback address and name a loopback
	// host in their Host header (localhost, 127.0.0.1, [::1], any port);
	// others get an empty picker and paste a token. A development instance
	// listening on all interfaces then does not hand its tokens to the
	// network, and a web page that rebinds its own DNS name to 127.0.0.1
	// (so that the visitor's browser reaches this instance as that page's
	// origin, Host naming the page's domain) gets none either. (Behind a
	// reverse proxy on the same host that keeps Host as localhost every
	// visitor looks local: don't set Tenants there.)
	TenantsLocalOnly bool
	// API is the origin of the fanout API ("https://fanout.example.com").
	// Empty: the dashboard's own origin. It must be an http(s) origin
	// without a path.
	API string
	// Metrics is the URL path (or URL) of the Prometheus endpoint the live
	// figures read. Empty: "/metrics" on the API origin; "-": no server
	// figures.
	Metrics string
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("web: invalid config")

// Handler returns the dashboard: index.html at its root, its scripts and
// styles, and config.json (Config as the page reads it). It is meant to be
// mounted on its own path prefix (with http.StripPrefix) or at "/"; the page
// refers to its files relatively. Every response carries a Content Security
// Policy that allows scripts only from the dashboard itself and connections
// only to it and the API: the page renders untrusted model output, and the
// policy is the second line of defence behind rendering it as text.
func Handler(cfg Config) (http.Handler, error) {
	connect := "'self'"
	if cfg.API != "" {
		u, err := url.Parse(cfg.API)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("%w: API %q is not an http(s) origin", ErrConfig, cfg.API)
		}
		cfg.API = u.Scheme + "://" + u.Host
		connect += " " + cfg.API
	}
	for _, t := range cfg.Tenants {
		if t.Tenant == "" || t.Token == "" {
			return nil, fmt.Errorf("%w: tenant entries need a tenant and a token", ErrConfig)
		}
	}
	if cfg.Metrics == "" {
		cfg.Metrics = cfg.API + "/metrics"
	}
	if cfg.Tenants == nil {
		cfg.Tenants = []Tenant{}
	}
	type pageConfig struct {
		Tenants []Tenant `json:"tenants"`
		API     string   `json:"api"`
		Metrics string   `json:"metrics"`
	}
	conf, err := json.Marshal(pageConfig{cfg.Tenants, cfg.API, cfg.Metrics})
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	// What a visitor from elsewhere gets when TenantsLocalOnly is set.
	remoteConf := conf
	if cfg.TenantsLocalOnly {
		if remoteConf, err = json.Marshal(pageConfig{[]Tenant{}, cfg.API, cfg.Metrics}); err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
	}
	csp := strings.Join([]string{
		"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
		"connect-src " + connect, "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
	}, "; ")
	static := http.FileServerFS(Static())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		// Tokens travel in URLs (EventSource cannot send headers): never
		// leak them to other sites through the Referer header.
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if strings.TrimPrefix(r.URL.Path, "/") == "config.json" {
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			if !cfg.TenantsLocalOnly || isLoopback(r.RemoteAddr) && isLoopbackHost(r.Host) {
				_, _ = w.Write(conf)
			} else {
				_, _ = w.Write(remoteConf)
			}
			return
		}
		h.Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	}), nil
}

// isLoopbackHost reports whether a Host header names this machine by a
// loopback name: "localhost" or a loopback IP address, with or without a
// port (case and one trailing dot ignored).
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// isLoopback reports whether a request's RemoteAddr ("host:port") is a
// loopback address.
func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
