package wire

// The names and partition count ingest and fanout agree on by default: the
// event stream, the dead-letter stream, the tap stream and the views
// bucket.
const (
	// DefaultStream is the default event stream (EventsWildcard).
	DefaultStream = "AGUI_EVENTS"
	// DefaultDeadLetters is the default stream of dead letters.
	DefaultDeadLetters = "THREADCAST_DEADLETTERS"
	// DefaultTapStream is the default stream of the durable analytics tap
	// (tap.>).
	DefaultTapStream = "THREADCAST_TAP"
	// DefaultViewsKV is the default checkpoint bucket (CheckpointKey).
	DefaultViewsKV = "THREADCAST_VIEWS"
	// DefaultParts is the default number of partitions P. Each partition an
	// instance owns costs a durable consumer, whose state the server
	// persists up to 10 times a second and which scans the stream for its
	// filter: measured on one instance (BenchmarkIngest, CPU per event), P=64
	// costs a third more than P=16, and P=8 no less than P=16. 16 allows up
	// to 16 instances.
	DefaultParts = 16
)
