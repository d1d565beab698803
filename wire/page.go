package wire

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// The page request and reply (see frame.go for the format).

// PageRequest asks for the Limit messages before the message Before (the
// newest Limit when Before is "").
type PageRequest struct {
	Before string `json:"before,omitempty"`
	Limit  int    `json:"limit"`
}

// Page is a decoded page reply. Messages alias the parsed buffer.
type Page struct {
	Tenant   string            `json:"tenant"`
	Thread   string            `json:"thread"`
	Seq      uint64            `json:"seq"`
	Status   string            `json:"status,omitempty"`
	Found    bool              `json:"found"`
	Messages []json.RawMessage `json:"messages"`
	First    int               `json:"first"`
	End      int               `json:"end"`
	Total    int               `json:"total"`
	Before   string            `json:"before,omitempty"`
}

// ParsePage decodes a page reply, returning the error a failed reply
// carries in its headers.
func ParsePage(msg *nats.Msg) (Page, error) {
	if kind := msg.Header.Get(HeaderErrorKind); kind != "" {
		return Page{}, fmt.Errorf("wire: page failed: %s: %s", kind, msg.Header.Get(HeaderError))
	}
	var p Page
	if err := json.Unmarshal(msg.Data, &p); err != nil {
		return Page{}, fmt.Errorf("wire: bad page: %w", err)
	}
	return p, nil
}
