// Package busauth is the tenant boundary on the NATS bus: an auth callout
// service that authorizes every client connection that is not one of
// Threadcast's own services, from the same bearer token the HTTP API takes
// (package auth).
//
// The NATS server is configured with an auth_callout block (issuer: the
// public key of Config.Issuer; auth_users: the services' identities), so for
// any other connection it sends an authorization request on
// $SYS.REQ.USER.AUTH and waits for the answer. Service answers it: a token
// that verifies, is unexpired and grants auth.ScopePublish gets a user whose
// permissions are exactly
//
//	publish:   agui.<tenant>.*.events (or, for a token limited to threads,
//	           the event subject of each thread it names)
//	subscribe: _INBOX_<tenant>.> (wire.InboxPrefix: its JetStream acks)
//
// in the agents' account (Config.Account, AgentAccount by default), and
// whose expiry is the token's, so the server closes the connection when
// the token expires. The agents' account imports the events subjects from
// the services' account and nothing else: NATS does not check a publish's
// reply subject against permissions, so in the services' account an agent
// could have JetStream deliver its ack to any subject (another tenant's
// view frames, a KV checkpoint); across the import the ack returns on a
// private reply subject to the agents' account. Everything else — another
// tenant's subjects, view/tap/dlq/tc.snap frames, aguip, $JS.API, $KV,
// $JS.ACK, the default _INBOX. of the services — is a permissions
// violation for that connection.
// A token without the publish scope, forged, expired or absent is refused at
// connect: the server logs the reason and tells the client "Authorization
// Violation"; each answer is counted by result (threadcast_bus_auth_total).
//
// What it does not do: it does not encrypt its exchange with the server
// (auth_callout's xkey; run it over TLS or on a private network), issue
// read access on NATS (subscribers read through the HTTP API), or create
// the server's configuration (docs/production.md gives it; package pipeline
// builds the embedded server's).
//
// # Concurrency
//
// A Service's handler runs on its NATS connection's callback goroutine
// (owned by the connection); Stop unsubscribes and is safe to call more
// than once. Permissions, Authorize and the other functions are pure and
// safe for concurrent use.
package busauth
