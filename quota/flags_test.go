package quota

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/envflag"
)

func TestBindFlags(t *testing.T) {
	files := map[string]string{
		"q.json":   `{"default":{"eventsBurst":7},"tenants":{"acme":{"eventsPerSec":50}}}`,
		"bad.json": `{"tenants":{"acme":{"nope":1}}}`,
	}
	readFile := func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		which   FlagSet
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "flags, env and file", which: IngestFlags | FanoutFlags,
			args: []string{"--quota-events-per-sec", "5", "--quota-streams", "9", "--quota-file", "q.json"},
			env:  map[string]string{"THREADCAST_QUOTA_TAPS": "2"},
			check: func(t *testing.T, c *Config) {
				if got := c.For("other"); got != (Limits{EventsPerSec: 5, EventsBurst: 7, Streams: 9, Taps: 2}) {
					t.Errorf("default %+v", got)
				}
				if got := c.For("acme"); got != (Limits{EventsPerSec: 50, EventsBurst: 7, Streams: 9, Taps: 2}) {
					t.Errorf("acme %+v", got)
				}
			}},
		{name: "fanout only", which: FanoutFlags, args: []string{"--quota-events-per-sec", "5"}, wantErr: "not defined"},
		{name: "missing file", which: IngestFlags, args: []string{"--quota-file", "nope.json"}, wantErr: "--quota-file"},
		{name: "bad file", which: IngestFlags, args: []string{"--quota-file", "bad.json"}, wantErr: "unknown field"},
		{name: "negative", which: FanoutFlags, args: []string{"--quota-taps", "-1"}, wantErr: "negative"},
		{name: "interval", which: IngestFlags, args: []string{"--quota-retained-interval", "1ms"}, wantErr: "100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			f := flag.NewFlagSet("x", flag.ContinueOnError)
			f.SetOutput(io.Discard)
			finish := BindFlags(f, &c, tt.which, "quota-streams")
			err := envflag.Parse(f, tt.args, func(k string) string { return tt.env[k] })
			if err == nil {
				err = finish(readFile)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "file") && !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v does not wrap the read error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, &c)
		})
	}
}
