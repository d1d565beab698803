package node_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
)

// startDomainServer starts a nats-server with JetStream in domain: a hub
// listening for leaf nodes when hub is nil, else a leaf node of hub.
func startDomainServer(t *testing.T, domain string, hub *server.Options) (*server.Server, *server.Options) {
	t.Helper()
	o := &server.Options{ServerName: domain, Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamDomain: domain,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	if hub == nil {
		o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", -1
	} else {
		u, err := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", hub.LeafNode.Port))
		if err != nil {
			t.Fatal(err)
		}
		o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{u}}}
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("server %s not ready", domain)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s, o
}

// domainNode starts an ingest node on a leaf node (domain "leaf") of a hub
// (domain "hub") whose JetStream holds the pipeline's stream and buckets
// (--js-domain hub); mod changes its config. It returns the node and the
// leaf and hub servers.
func domainNode(t *testing.T, mod func(*Config)) (*Node, *server.Server, *server.Server) {
	t.Helper()
	hub, ho := startDomainServer(t, "hub", nil)
	leaf, _ := startDomainServer(t, "leaf", ho)
	testsupport.WaitFor(t, 10*time.Second, "the leaf node connected", func() bool {
		return hub.NumLeafNodes() == 1 && leaf.NumLeafNodes() == 1
	})
	c := testConfig(t)
	c.NatsURL, c.DataDir = leaf.ClientURL(), ""
	c.Fanout, c.Bridge, c.AuthKey = false, false, nil
	c.Pipeline.Domain = "hub"
	if mod != nil {
		mod(&c)
	}
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, n)
	return n, leaf, hub
}

// TestNodeCheckpointsInDomain: with the pipeline in a JetStream domain
// other than the one of the server ingest connects to, ingest's
// checkpoints reach the bucket of that domain, and Stop finds every view
// checkpointed.
func TestNodeCheckpointsInDomain(t *testing.T) {
	n, leaf, hub := domainNode(t, nil)
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()
	nc, err := nats.Connect(leaf.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, ev := range []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`} {
		if err := nc.Publish("agui.acme.t.events", []byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	hc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	js, err := jetstream.New(hc)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "a checkpoint in the hub's bucket", func() bool {
		kv, err := js.KeyValue(context.Background(), pipeline.DefaultConfig().Bucket)
		if err != nil {
			return false
		}
		keys, err := kv.ListKeys(context.Background())
		if err != nil {
			return false
		}
		found := false
		for k := range keys.Keys() {
			found = found || strings.Contains(k, "acme")
		}
		return found
	})
	stopped = true
	if err := n.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestNodeRetainedQuotaInDomain: with the pipeline in a JetStream domain
// (--js-domain) other than the one of the server ingest connects to (a
// leaf node's), the retained-events quota counts the tenant's messages in
// the event stream of that domain, and ingest sheds past it.
func TestNodeRetainedQuotaInDomain(t *testing.T) {
	n, leaf, _ := domainNode(t, func(c *Config) {
		c.Quota.Default.EventsRetained = 3
		c.Quota.RetainedEvery = 100 * time.Millisecond
	})
	defer func() { _ = n.Stop() }()
	nc, err := nats.Connect(leaf.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testsupport.WaitFor(t, 20*time.Second, "events shed over the retained quota", func() bool {
		// One run's worth more each time; the count is polled.
		for _, ev := range []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`} {
			if err := nc.Publish("agui.acme.t.events", []byte(ev)); err != nil {
				t.Fatal(err)
			}
		}
		_ = nc.Flush()
		return sumCounter(t, n, "threadcast_ingest_quota_shed_events_total", "acme") > 0
	})
}
