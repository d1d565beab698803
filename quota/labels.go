package quota

import "sync"

// OtherTenants is the label value of every tenant past TenantLabels' cap.
const OtherTenants = "_other"

// TenantLabels bounds the tenant label values of a metric: the first Max
// distinct tenants labelled keep their name, every later one is
// OtherTenants. Tenant names are never "_other" (a tenant token starts with
// a letter or digit), so the two cannot be confused. Safe for concurrent
// use.
type TenantLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
}

// DefaultTenantLabels is the cap commands use.
const DefaultTenantLabels = 100

// NewTenantLabels returns a TenantLabels keeping n names (n < 1: 1).
func NewTenantLabels(n int) *TenantLabels {
	return &TenantLabels{max: max(1, n), seen: make(map[string]struct{})}
}

// Label returns tenant's label value.
func (l *TenantLabels) Label(tenant string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[tenant]; ok {
		return tenant
	}
	if len(l.seen) >= l.max {
		return OtherTenants
	}
	l.seen[tenant] = struct{}{}
	return tenant
}
