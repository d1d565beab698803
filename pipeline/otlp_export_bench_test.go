package pipeline_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/threadcast/threadcast/otelexport"
	"github.com/threadcast/threadcast/pipeline"
)

func init() { pipeline.BenchOTLPSink = otlpSink }

// otlpSink exports to an OTLP/HTTP receiver on loopback that reads each
// request and answers with an empty (valid) export response.
func otlpSink(tb testing.TB) (pipeline.RunSink, func() (float64, float64)) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	cfg := otelexport.DefaultConfig()
	cfg.Enabled, cfg.Endpoint, cfg.Protocol = true, srv.URL, "http"
	m := otelexport.NewMetrics(nil)
	e, err := otelexport.NewWithMetrics(cfg, m, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
		srv.Close()
	})
	return e, func() (float64, float64) {
		return testutil.ToFloat64(m.Runs.WithLabelValues("exported")), testutil.ToFloat64(m.Runs.WithLabelValues("dropped"))
	}
}
