// Package web is Threadcast's dashboard: a static page (HTML, CSS and
// JavaScript modules embedded in the binary, no build step) that the fanout
// serves, and that reads the fanout's own API like any other client.
//
// The page lets an operator pick a tenant, watch the tenant's threads (a
// live list with status and last activity, from GET /v1/threads and its
// live SSE variant), and open one: its messages stream in, tool calls show
// their arguments and results, activities render as widgets (web_search
// and checklist; any other type as JSON), reasoning is folded in a
// <details>, the agent state is a live JSON tree, runs show their outcome
// and token usage, and messages of subagents carry a badge per
// subagentRunId. A header shows live figures: frames per second and draw
// time on the open thread, and — from the server's Prometheus metrics —
// ingest events per second, messages sent per second, publish-to-delivery
// latency and subscribers.
//
// The page holds no AG-UI logic. It subscribes to a thread in the fanout's
// `view` mode (EventSource with the token in access_token; the browser
// resumes a dropped connection with Last-Event-ID) and applies view
// documents and change documents (package viewchange) in one module,
// static/viewdoc.js; everything else only draws the view document. Updates
// are batched into one draw per animation frame, and a streamed text delta
// costs one appendData on the message's text node.
//
// The thread list (static/threadlist.js) is virtualized: rows of a fixed
// height (rowHeight, which app.css repeats), only those in view and a few
// beyond in the DOM, each updated in place while its thread is in view. It
// is ordered by last activity and re-sorted at most twice a second, never
// while the pointer is over it, so that a row does not move between a press
// and its release. Statuses come from the listing's pages, live events only
// add newer ones. An open thread follows its newest message until the
// reader scrolls up. A token given as #token= is kept in sessionStorage and
// removed from the address.
//
// Everything from a thread is untrusted and reaches the DOM only as text
// (static/dom.js builds every element; no innerHTML anywhere), links are
// made only from http(s) URLs, and Handler sends a Content Security Policy
// that forbids any script but the page's own.
//
// # Concurrency
//
// Handler's http.Handler is safe for concurrent use; it serves immutable
// embedded files and a config document fixed at construction. The package
// has no mutable package-level state.
package web
