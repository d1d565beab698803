package testsupport

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// SSEEvent is one block of a text/event-stream: the fields of the lines up
// to a blank line.
type SSEEvent struct {
	ID      string // the id field (one leading space removed)
	HasID   bool   // whether the block has an id field, which may be empty
	Event   string // the event field
	Data    string // the data fields, joined with "\n"
	HasData bool   // whether the block has a data field, which may be empty
	Comment string // the last comment line, without ":" and spaces around it
}

// ReadSSE reads the next block from br that has data, an id or a comment (a
// block with only an event name or retry field is passed over, as
// EventSource passes it over). Lines end in "\n" or "\r\n"; no line is too
// long. On a read error it returns the error and the block read so far.
func ReadSSE(br *bufio.Reader) (SSEEvent, error) {
	var ev SSEEvent
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			ev.Data = strings.Join(data, "\n")
			return ev, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if ev.HasData || ev.HasID || ev.Comment != "" {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			ev = SSEEvent{}
		case strings.HasPrefix(line, ":"):
			ev.Comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id:"):
			ev.ID, ev.HasID = field(line, "id:"), true
		case strings.HasPrefix(line, "event:"):
			ev.Event = field(line, "event:")
		case strings.HasPrefix(line, "data:"):
			data, ev.HasData = append(data, field(line, "data:")), true
		}
	}
}

// field returns the value of a line that starts with name, without the one
// space that may follow the colon.
func field(line, name string) string {
	return strings.TrimPrefix(strings.TrimPrefix(line, name), " ")
}

// SSEReader reads the blocks of an event stream, remembering the last id as
// EventSource does for Last-Event-ID.
type SSEReader struct {
	BR     *bufio.Reader
	LastID string // the id of the last block that had one
}

// NewSSEReader returns an SSEReader of r.
func NewSSEReader(r io.Reader) *SSEReader { return &SSEReader{BR: bufio.NewReader(r)} }

// Next returns the next block, as ReadSSE does, and records its id.
func (r *SSEReader) Next() (SSEEvent, error) {
	ev, err := ReadSSE(r.BR)
	if err == nil && ev.HasID {
		r.LastID = ev.ID
	}
	return ev, err
}

// SSEStream is an open event-stream response.
type SSEStream struct {
	*SSEReader
	Resp   *http.Response
	cancel context.CancelFunc
}

// OpenSSE sends req (under a context that Cancel and Close cancel) with the default
// client. On 200 it returns the stream, closed by t.Cleanup too; otherwise
// it reads and closes the body and returns nil with the status. It fails t
// when the request cannot be sent.
func OpenSSE(t testing.TB, req *http.Request) (*SSEStream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	s := &SSEStream{SSEReader: NewSSEReader(resp.Body), Resp: resp, cancel: cancel}
	t.Cleanup(s.Close)
	return s, resp.StatusCode
}

// Cancel cancels the request's context: a Next blocked on the body returns
// the context's error.
func (s *SSEStream) Cancel() { s.cancel() }

// Close cancels the request and closes the body.
func (s *SSEStream) Close() {
	s.cancel()
	s.Resp.Body.Close()
}
