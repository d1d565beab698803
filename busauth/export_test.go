package busauth

import "github.com/nats-io/nats.go"

// Handle runs s's request handler on m: a service user cannot publish to
// AuthSubject (the server denies it), so a request no server would send is
// handed to the handler directly.
func Handle(s *Service, m *nats.Msg) { s.handle(m) }
