// Package subject is Threadcast's NATS vocabulary: the subjects, KV keys and
// thread tokens shared by every process that talks to NATS for Threadcast —
// the publisher SDK (agent/), the HTTP bridge, ingest and fanout. It exists
// apart from pipeline/ so that a publisher can name a subject without
// linking pipeline's dependencies (an embedded nats-server): it imports the
// standard library only.
//
// Thread ids come from the wire; EncodeThread turns one into a subject token
// that can never be a separator or a wildcard, so no id can address another
// thread or tenant. Tenants are operator-chosen names, validated (ValidTenant),
// never escaped.
//
// # Concurrency contract
//
// Every function is pure and safe for concurrent use; the package keeps no
// state.
package subject
