package jupyter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Server-side execution, jupyter-server-documents' POST /api/kernels/{kernel_id}/execute: the
// server runs the cells of a room in the kernel attached to that room (through a kernel session
// on the notebook's path) and writes outputs, execution_state and execution_count into the
// document itself. It answers once the cells are queued; completion is seen in the document.

// RunHash is the hash jupyter-server-documents' execute API checks a cell's source against (its
// source_hash): MurmurHash2 (seed 0) of the source's UTF-8 bytes, as a decimal string (its
// ynotebook_room._source_hash and the frontend's murmur2). The server refuses to run a cell whose
// current source hashes differently (409). Not the source hash reads show and
// expected_source_hash compares (ydoc.SourceHash, a short SHA-256).
func RunHash(source string) string {
	const m = 0x5bd1e995
	data := []byte(source)
	h := uint32(len(data)) // seed 0
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> 24
		k *= m
		h = h*m ^ k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return strconv.FormatUint(uint64(h), 10)
}

// CellToRun names a cell and the run hash (RunHash) of the source it must have when it runs.
type CellToRun struct {
	CellID  string `json:"cell_id"`
	RunHash string `json:"source_hash"` // the server's field name
}

// ExecuteCellsRequest is the body of POST /api/kernels/{id}/execute.
type ExecuteCellsRequest struct {
	DocumentID        string      `json:"document_id"` // the room id, json:notebook:{file_id}
	Cells             []CellToRun `json:"cells"`
	ClientID          string      `json:"client_id,omitempty"`
	RequestID         string      `json:"request_id,omitempty"`
	PreviousRequestID string      `json:"previous_request_id,omitempty"` // queue after that request
}

// ErrSourceMismatch is returned when a cell's source changed since its hash was taken (409);
// nothing was queued.
var ErrSourceMismatch = errors.New("the cell's source changed before the server ran it")

// ErrPredecessorTimeout is returned when previous_request_id was not queued within the server's
// 10 s (408); nothing was queued.
var ErrPredecessorTimeout = errors.New("the previous execution request never reached the server")

// ErrRoomWithoutKernel is returned when the notebook's room has no kernel attached (400 "not
// connected to a kernel"): a kernel session for the notebook's path attaches one when it is
// created or its kernel changes (UpdateSessionKernel), and a room the server freed and loaded
// again has lost it. Nothing was queued.
var ErrRoomWithoutKernel = errors.New("the notebook's room on the server has no kernel attached")

// ExecuteCells queues cells for server-side execution. A 400 says why the server cannot (no
// such room, not a notebook, a cell missing or not code, or no kernel attached to the room:
// ErrRoomWithoutKernel).
func (c *Client) ExecuteCells(ctx context.Context, kernelID string, req ExecuteCellsRequest) error {
	u := c.endpoint("api", "kernels", kernelID, "execute")
	_, err := c.do(ctx, http.MethodPost, u, req, nil)
	var api *APIError
	if errors.As(err, &api) {
		switch {
		case api.Status == http.StatusConflict:
			return fmt.Errorf("%w: %w", ErrSourceMismatch, err)
		case api.Status == http.StatusRequestTimeout:
			return fmt.Errorf("%w: %w", ErrPredecessorTimeout, err)
		case api.Status == http.StatusBadRequest && (strings.Contains(api.Message, "not connected to a kernel") ||
			strings.Contains(api.Message, "execution worker is not running")):
			// ynotebook_room.py :: execute_cells raises these when connect_kernel never ran on
			// this room (or disconnect_kernel did: the room was freed, the kernel died).
			return fmt.Errorf("%w: %w", ErrRoomWithoutKernel, err)
		}
	}
	return err
}
