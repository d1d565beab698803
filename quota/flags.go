package quota

import (
	"flag"
	"fmt"
	"time"
)

// FlagSet selects the quota flags a command declares.
type FlagSet uint8

// The flag groups: the ingest's (rates, bodies, retained events) and the
// fanout's (streams, threads, taps). Every command with either gets
// --quota-file, --quota-max-tenants and --quota-idle-after.
const (
	IngestFlags FlagSet = 1 << iota
	FanoutFlags
)

// BindFlags declares the quota flags of which on fs, with c's values as
// defaults, so that a command's flag parsing (envflag: THREADCAST_QUOTA_*)
// fills c. streamsFlag names the flag of Default.Streams (the fanout's
// historical --max-conns-per-tenant, or quota-streams). The returned
// function, called after parsing, applies --quota-file (read with
// readFile) over the flags' defaults and validates the result. The package
// reads no flag, file or variable itself: the command parses and reads.
func BindFlags(fs *flag.FlagSet, c *Config, which FlagSet, streamsFlag string) (finish func(readFile func(string) ([]byte, error)) error) {
	d := &c.Default
	var file string
	if which&IngestFlags != 0 {
		fs.Float64Var(&d.EventsPerSec, "quota-events-per-sec", d.EventsPerSec, "quota: ingest events per second per tenant (token bucket; 0: unlimited)")
		fs.Int64Var(&d.EventsBurst, "quota-events-burst", d.EventsBurst, "quota: events a tenant may send at once (0: one second's worth)")
		fs.Float64Var(&d.BytesPerSec, "quota-bytes-per-sec", d.BytesPerSec, "quota: ingest event bytes per second per tenant (0: unlimited)")
		fs.Int64Var(&d.BytesBurst, "quota-bytes-burst", d.BytesBurst, "quota: event bytes a tenant may send at once (0: one second's worth)")
		fs.Int64Var(&d.BodyBytesInFlight, "quota-body-bytes", d.BodyBytesInFlight, "quota: bytes of bridge request bodies in flight per tenant (0: unlimited)")
		fs.Int64Var(&d.EventsRetained, "quota-events-retained", d.EventsRetained, "quota: messages a tenant may keep in the event log (0: unlimited)")
		fs.DurationVar(&c.RetainedEvery, "quota-retained-interval", c.RetainedEvery, "how often each tenant's retained messages are counted")
	}
	if which&FanoutFlags != 0 {
		fs.Int64Var(&d.Streams, streamsFlag, d.Streams, "quota: concurrent streams per tenant (0: unlimited)")
		fs.Int64Var(&d.Threads, "quota-threads", d.Threads, "quota: distinct threads a tenant's streams subscribe to (0: unlimited)")
		fs.Int64Var(&d.Taps, "quota-taps", d.Taps, "quota: concurrent tap streams per tenant (0: unlimited)")
	}
	fs.StringVar(&file, "quota-file", "", "JSON `file` of per-tenant quota overrides (format: README.md, Quotas)")
	fs.IntVar(&c.MaxTenants, "quota-max-tenants", c.MaxTenants, "tenants whose quota state is kept; past it the least recently used idle one is forgotten")
	fs.DurationVar(&c.IdleAfter, "quota-idle-after", c.IdleAfter, "forget the quota state of a tenant idle this long")
	return func(readFile func(string) ([]byte, error)) error {
		if file != "" {
			data, err := readFile(file)
			if err != nil {
				return fmt.Errorf("--quota-file: %w", err)
			}
			if err := c.ParseFile(data); err != nil {
				return fmt.Errorf("--quota-file %s: %w", file, err)
			}
		}
		if err := c.Validate(); err != nil {
			return err
		}
		if c.RetainedEvery < 0 || c.RetainedEvery > 0 && c.RetainedEvery < 100*time.Millisecond {
			return fmt.Errorf("%w: --quota-retained-interval %v below 100ms", ErrConfig, c.RetainedEvery)
		}
		return nil
	}
}
