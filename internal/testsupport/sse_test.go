package testsupport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadSSE(t *testing.T) {
	in := "event: start\n\n" + // an event name alone is passed over
		": keep-alive\n\n" +
		"id: 5\nevent: message\ndata: {\"a\":1}\n\n" +
		"data:line one\r\ndata: line two\r\n\r\n" +
		"id:\n\n" + // an empty id resets, and is a block
		"data:\n\n" + // an empty data field
		": a\n: end reason=x\nid: 9.snap\n\n" +
		"data: cut\n"
	br := bufio.NewReader(strings.NewReader(in))
	want := []SSEEvent{
		{Comment: "keep-alive"},
		{ID: "5", HasID: true, Event: "message", Data: `{"a":1}`, HasData: true},
		{Data: "line one\nline two", HasData: true},
		{HasID: true},
		{HasData: true},
		{ID: "9.snap", HasID: true, Comment: "end reason=x"},
	}
	for i, w := range want {
		got, err := ReadSSE(br)
		if err != nil || got != w {
			t.Fatalf("block %d: %+v, %v; want %+v", i, got, err, w)
		}
	}
	got, err := ReadSSE(br)
	if !errors.Is(err, io.EOF) || got.Data != "cut" {
		t.Fatalf("after the last block: %+v, %v; want the cut block and EOF", got, err)
	}
}

// An SSEReader remembers the last id, as EventSource does.
func TestSSEReaderLastID(t *testing.T) {
	r := NewSSEReader(strings.NewReader("id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n"))
	var ids []string
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		ids = append(ids, r.LastID)
	}
	if want := []string{"1", "1", "2"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("last ids %q, want %q", ids, want)
	}
}

// OpenSSE against a real HTTP server: the stream is read as it is written,
// Cancel ends a blocked Next, and a refusal is a status.
func TestOpenSSE(t *testing.T) {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "id: %d\nevent: message\ndata: %d\n\n", i, i*i)
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hs.Close()
	defer close(release)

	req, _ := http.NewRequest("GET", hs.URL, nil)
	if s, status := OpenSSE(t, req); s != nil || status != http.StatusUnauthorized {
		t.Fatalf("without a token: %v, %d", s, status)
	}
	req, _ = http.NewRequest("GET", hs.URL, nil)
	req.Header.Set("Authorization", "Bearer ok")
	s, status := OpenSSE(t, req)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if ct := s.Resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	for i := range 3 {
		ev, err := s.Next()
		if want := (SSEEvent{ID: fmt.Sprint(i), HasID: true, Event: "message", Data: fmt.Sprint(i * i), HasData: true}); err != nil || ev != want {
			t.Fatalf("event %d: %+v, %v; want %+v", i, ev, err, want)
		}
	}
	if s.LastID != "2" {
		t.Fatalf("last id %q", s.LastID)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Next()
		done <- err
	}()
	s.Cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after Cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Cancel did not end a blocked Next")
	}
	s.Close()
}
