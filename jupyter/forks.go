package jupyter

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Forks and the timeline: jupyter-collaboration's DocForkHandler (/api/collaboration/fork/...),
// TimelineHandler and UndoRedoHandler. Forks live in the server's memory only: a restart loses
// them.

// ForkInfo describes a fork as the server keeps it.
type ForkInfo struct {
	RootRoomID  string `json:"root_roomid"`
	Synchronize bool   `json:"synchronize"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// ForkCreated is the answer of PUT /api/collaboration/fork/{root}.
type ForkCreated struct {
	SessionID  string   `json:"sessionId"`
	ForkRoomID string   `json:"fork_roomid"`
	Info       ForkInfo `json:"fork_info"`
}

// CreateFork forks a live room (404 when the root room is not in the server's memory).
// synchronize keeps root updates flowing into the fork.
func (c *Client) CreateFork(ctx context.Context, rootRoomID, title, description string, synchronize bool) (ForkCreated, error) {
	var out ForkCreated
	body := map[string]any{"title": title, "description": description, "synchronize": synchronize}
	_, err := c.do(ctx, http.MethodPut, c.endpoint("api", "collaboration", "fork", rootRoomID), body, &out)
	if err == nil && out.ForkRoomID == "" {
		err = fmt.Errorf("PUT fork %s: no fork_roomid in the answer", rootRoomID)
	}
	return out, err
}

// ListForks returns the forks of a root room by fork room id.
func (c *Client) ListForks(ctx context.Context, rootRoomID string) (map[string]ForkInfo, error) {
	out := map[string]ForkInfo{}
	_, err := c.do(ctx, http.MethodGet, c.endpoint("api", "collaboration", "fork", rootRoomID), nil, &out)
	return out, err
}

// DeleteFork deletes a fork, first applying its whole state to the root room when merge is set
// (a CRDT merge: the fork's deletions carry over).
func (c *Client) DeleteFork(ctx context.Context, forkRoomID string, merge bool) error {
	u := c.endpoint("api", "collaboration", "fork", forkRoomID)
	u.RawQuery = url.Values{"merge": {strconv.FormatBool(merge)}}.Encode()
	_, err := c.do(ctx, http.MethodDelete, u, nil, nil)
	return err
}

// Timeline is the answer of GET /api/collaboration/timeline/{path}: the store's history as an
// undoable fork room.
type Timeline struct {
	RoomID     string    `json:"roomId"`
	Timestamps []float64 `json:"timestamps"`
	ForkRoom   string    `json:"forkRoom"`
	SessionID  string    `json:"sessionId"`
}

// Timeline builds, on the server, a fork of a document replaying its stored history (one undo
// step per stored update). Each call creates a room the server never frees; use sparingly.
func (c *Client) Timeline(ctx context.Context, path, format, docType string) (Timeline, error) {
	u := c.endpoint("api", "collaboration", "timeline", path)
	u.RawQuery = url.Values{"format": {format}, "type": {docType}}.Encode()
	var out Timeline
	_, err := c.do(ctx, http.MethodGet, u, nil, &out)
	return out, err
}

// TimelineStep moves a timeline fork: action undo or redo by steps, or restore (which only
// frees the server's undo manager).
func (c *Client) TimelineStep(ctx context.Context, roomID, forkRoom, action string, steps int) error {
	u := c.endpoint("api", "collaboration", "undo_redo", roomID)
	u.RawQuery = url.Values{"action": {action}, "steps": {strconv.Itoa(steps)}, "forkRoom": {forkRoom}}.Encode()
	_, err := c.do(ctx, http.MethodPut, u, nil, nil)
	return err
}
