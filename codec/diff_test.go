package codec

import (
	"fmt"
	"reflect"
	"strings"
)

// eventDiff names the fields in which a and b differ ("" when equal). Raw
// values compare byte for byte, nil and empty slices as different.
func eventDiff(a, b *Event) string {
	var out []string
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s: %#v != %#v", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface()))
		}
	}
	return strings.Join(out, "; ")
}
