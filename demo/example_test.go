package demo_test

import (
	"context"
	"fmt"
	"time"

	"github.com/threadcast/threadcast/demo"
)

// A load generator drives scripts itself: each NextRun is one run of the
// thread, valid AG-UI 1.0, with a timing hint per event.
func ExampleNewScript() {
	s := demo.NewScript(7, demo.Options{ThreadID: "thread-1", Persona: "travel", ErrorRate: -1})
	run := s.NextRun()
	for _, ev := range run[:4] {
		fmt.Println(ev.Type)
	}
	fmt.Println("...", run[len(run)-1].Type)
	// Output:
	// RUN_STARTED
	// TEXT_MESSAGE_START
	// TEXT_MESSAGE_CONTENT
	// TEXT_MESSAGE_END
	// ... RUN_FINISHED
}

// Run plays agents through any Publisher; AgentPublisher adapts the SDK.
func ExampleRun() {
	count := 0
	p := demo.PublisherFunc(func(_ context.Context, tenant, thread string, event []byte) error {
		count++ // one goroutine per agent: a real publisher must be safe for concurrent use
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stats, err := demo.Run(ctx, p, demo.Config{Tenants: []string{"acme"}, Agents: 1, Rate: 100000, RunsPerThread: 2, ThreadsPerAgent: 1, Seed: 1})
	fmt.Println(err, stats.Threads, stats.Runs, stats.Events == uint64(count))
	// Output: <nil> 1 2 true
}
