package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

func TestEventStoreReplaysAndForgets(t *testing.T) {
	ctx := context.Background()
	s := newEventStore(100, 5)
	var ids []string
	for i := 0; i < 4; i++ {
		stream := "a"
		if i%2 == 1 {
			stream = "b"
		}
		id, err := s.StoreEvent(ctx, "s1", stream, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var got []string
	stream, err := s.ReplayEventsAfter(ctx, "s1", ids[0], func(id string, m json.RawMessage) error {
		got = append(got, string(m))
		return nil
	})
	if err != nil || stream != "a" || strings.Join(got, ",") != `{"n":2}` {
		t.Fatalf("replay after the first event: stream %q, %v, %v", stream, got, err)
	}
	if _, err := s.ReplayEventsAfter(ctx, "other", ids[0], func(string, json.RawMessage) error { return nil }); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("another session's event: %v", err)
	}
	// Over the byte budget the oldest events go; resuming from them is an unknown event.
	for i := 0; i < 20; i++ {
		if _, err := s.StoreEvent(ctx, "s1", "a", json.RawMessage(`{"payload":"0123456789"}`)); err != nil {
			t.Fatal(err)
		}
	}
	log := s.sessions["s1"]
	if log.bytes > 100 || len(log.events) > 5 {
		t.Errorf("session holds %d bytes in %d events; budget 100 bytes, 5 events", log.bytes, len(log.events))
	}
	if _, err := s.ReplayEventsAfter(ctx, "s1", ids[0], func(string, json.RawMessage) error { return nil }); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("a forgotten event: %v", err)
	}
	if s.size() != log.bytes {
		t.Errorf("store size %d, session holds %d", s.size(), log.bytes)
	}
	if err := s.PurgeSession(ctx, "s1"); err != nil || len(s.sessions) != 0 || s.size() != 0 {
		t.Errorf("purge: %v, %d sessions left, %d bytes", err, len(s.sessions), s.size())
	}
	if _, err := s.ReplayEventsAfter(ctx, "s1", "garbage", func(string, json.RawMessage) error { return nil }); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("a malformed id: %v", err)
	}
}
