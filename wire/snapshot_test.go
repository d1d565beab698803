package wire

import (
	"errors"
	"testing"
)

func TestParseSnapRequest(t *testing.T) {
	for _, tt := range []struct {
		give    string
		want    SnapRequest
		wantErr bool
	}{
		{give: "", want: SnapRequest{}},
		{give: `{}`, want: SnapRequest{}},
		{give: `{"window":50}`, want: SnapRequest{Window: 50}},
		{give: `{"page":{"limit":20}}`, want: SnapRequest{Page: &PageRequest{Limit: 20}}},
		{give: `{"page":{"before":"m1","limit":20}}`, want: SnapRequest{Page: &PageRequest{Before: "m1", Limit: 20}}},
		{give: `{"window":-1}`, wantErr: true},
		{give: `{"page":{"limit":0}}`, wantErr: true},
		{give: `{"page":{"limit":5},"window":3}`, wantErr: true},
		{give: `{"windows":3}`, wantErr: true},
		{give: `{"window":"3"}`, wantErr: true},
		{give: `not json`, wantErr: true},
	} {
		got, err := ParseSnapRequest([]byte(tt.give))
		if tt.wantErr {
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("ParseSnapRequest(%s) = %+v, %v; want ErrBadRequest", tt.give, got, err)
			}
			continue
		}
		if err != nil || got.Window != tt.want.Window || (got.Page == nil) != (tt.want.Page == nil) ||
			(got.Page != nil && *got.Page != *tt.want.Page) {
			t.Errorf("ParseSnapRequest(%s) = %+v, %v; want %+v", tt.give, got, err, tt.want)
		}
		// Encode gives back what parses to the same request.
		again, err := ParseSnapRequest(got.Encode())
		if err != nil || again.Window != got.Window || (again.Page == nil) != (got.Page == nil) {
			t.Errorf("Encode of %+v does not parse back: %s, %v", got, got.Encode(), err)
		}
	}
}
