package envflag

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	tests := []struct{ give, want string }{
		{"http", "THREADCAST_HTTP"},
		{"nats-url", "THREADCAST_NATS_URL"},
		{"max-conns-per-tenant", "THREADCAST_MAX_CONNS_PER_TENANT"},
		{"js-domain", "THREADCAST_JS_DOMAIN"},
	}
	for _, tt := range tests {
		if got := EnvName(tt.give); got != tt.want {
			t.Errorf("EnvName(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// vars are the flag values one Parse produced.
type vars struct {
	URL   string
	Drain time.Duration
	N     int
	Tap   bool
}

func newSet() (*flag.FlagSet, *vars) {
	v := &vars{}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&v.URL, "nats-url", "nats://default", "")
	fs.DurationVar(&v.Drain, "drain", 20*time.Second, "")
	fs.IntVar(&v.N, "partitions", 8, "")
	fs.BoolVar(&v.Tap, "tap", true, "")
	return fs, v
}

func TestParse(t *testing.T) {
	defaults := vars{URL: "nats://default", Drain: 20 * time.Second, N: 8, Tap: true}
	tests := []struct {
		name    string
		give    []string
		env     map[string]string
		want    vars
		wantErr string // substring; "" means no error
		wantIs  error
	}{
		{name: "defaults", want: defaults},
		{name: "flags", give: []string{"--nats-url", "nats://f", "--drain", "5s", "-partitions=3", "--tap=false"},
			want: vars{URL: "nats://f", Drain: 5 * time.Second, N: 3, Tap: false}},
		{name: "env", env: map[string]string{"THREADCAST_NATS_URL": "nats://e", "THREADCAST_DRAIN": "1m", "THREADCAST_PARTITIONS": "32", "THREADCAST_TAP": "false"},
			want: vars{URL: "nats://e", Drain: time.Minute, N: 32, Tap: false}},
		{name: "flag over env", give: []string{"--partitions", "16"}, env: map[string]string{"THREADCAST_PARTITIONS": "32", "THREADCAST_DRAIN": "1m"},
			want: vars{URL: "nats://default", Drain: time.Minute, N: 16, Tap: true}},
		{name: "empty env keeps the default", env: map[string]string{"THREADCAST_NATS_URL": "", "THREADCAST_PARTITIONS": ""}, want: defaults},
		{name: "other variables ignored", env: map[string]string{"NATS_URL": "nats://x", "THREADCAST_BOGUS": "1", "threadcast_drain": "1s"}, want: defaults},
		{name: "bad env value", env: map[string]string{"THREADCAST_DRAIN": "soon"},
			wantErr: `THREADCAST_DRAIN="soon": parse error`},
		{name: "bad env value wins over a good flag", give: []string{"--drain", "1s"}, env: map[string]string{"THREADCAST_DRAIN": "soon"},
			wantErr: `THREADCAST_DRAIN="soon"`},
		{name: "first bad env in flag order", env: map[string]string{"THREADCAST_PARTITIONS": "many", "THREADCAST_DRAIN": "soon"},
			wantErr: `THREADCAST_DRAIN="soon"`},
		{name: "env value out of range", env: map[string]string{"THREADCAST_PARTITIONS": "99999999999999999999"},
			wantErr: `THREADCAST_PARTITIONS="99999999999999999999": value out of range`},
		{name: "bad env bool", env: map[string]string{"THREADCAST_TAP": "maybe"}, wantErr: `THREADCAST_TAP="maybe"`},
		{name: "bad flag value", give: []string{"--partitions", "many"}, wantErr: `invalid value "many" for flag -partitions`},
		{name: "unknown flag", give: []string{"--bogus"}, wantErr: "flag provided but not defined: -bogus"},
		{name: "missing flag value", give: []string{"--drain"}, wantErr: "flag needs an argument: -drain"},
		{name: "help", give: []string{"--help"}, wantIs: flag.ErrHelp},
		{name: "short help", give: []string{"-h"}, wantIs: flag.ErrHelp},
		{name: "operand", give: []string{"x"}, wantErr: `unexpected arguments ["x"]`},
		{name: "operands after flags", give: []string{"--tap=false", "a", "b"}, wantErr: `unexpected arguments ["a" "b"]`},
		{name: "operands after --", give: []string{"--", "--drain"}, wantErr: `unexpected arguments ["--drain"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, got := newSet()
			err := Parse(fs, tt.give, func(k string) string { return tt.env[k] })
			switch {
			case tt.wantIs != nil:
				if !errors.Is(err, tt.wantIs) {
					t.Fatalf("err = %v, want %v", err, tt.wantIs)
				}
				return
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if *got != tt.want {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}
