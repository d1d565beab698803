package otelexport

import (
	"unicode/utf8"

	"github.com/threadcast/threadcast/pipeline"
)

// OtherValue stands, in a metric attribute, for the values of a tenant
// past its first MaxAttrValues of that attribute.
const OtherValue = "_other"

// MaxAttrValues is how many distinct gen_ai.provider.name,
// gen_ai.request.model and error.type values each tenant's metrics carry;
// later ones are recorded as OtherValue. Spans keep every value.
const MaxAttrValues = 32

// attrValues bounds the metric attribute values a tenant's events decide.
// They are whatever a producer wrote: unbounded, one tenant could fill an
// instrument's cardinality limit (the SDK's, 2,000 attribute sets) and
// fold every other tenant's new series into the SDK's overflow set. Used
// by the export goroutine alone.
type attrValues struct {
	max     int
	tenants map[string]*[3]map[string]struct{}
}

// The attributes attrValues bounds.
const (
	valProvider = iota
	valModel
	valErrType
)

func newAttrValues(max int) *attrValues {
	return &attrValues{max: max, tenants: make(map[string]*[3]map[string]struct{})}
}

// value returns v, cut at pipeline.MaxSpanString bytes, or OtherValue
// when tenant already has max other values of attribute kind. "" stays ""
// (the attribute is absent).
func (a *attrValues) value(tenant string, kind int, v string) string {
	if v == "" {
		return ""
	}
	if len(v) > pipeline.MaxSpanString {
		n := pipeline.MaxSpanString
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		v = v[:n]
	}
	t := a.tenants[tenant]
	if t == nil {
		t = new([3]map[string]struct{})
		a.tenants[tenant] = t
	}
	seen := t[kind]
	if _, ok := seen[v]; ok {
		return v
	}
	if len(seen) >= a.max {
		return OtherValue
	}
	if seen == nil {
		seen = make(map[string]struct{})
		t[kind] = seen
	}
	seen[v] = struct{}{}
	return v
}
