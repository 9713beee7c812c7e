package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Version identifies a state of a room's replica as this sidecar saw it: an epoch (one per Room
// instance, so tokens from another run or an earlier room are recognised) and the number of
// changes applied since the room opened. Agents pass it back as expected_version (refuse the edit
// if the cells it touches changed) or since_version (read only what changed).
type Version string

// Errors of History.Since.
var (
	ErrUnknownVersion = errors.New("bridge: version is not from this room (the sidecar restarted or the room was reopened)")
	ErrVersionTooOld  = errors.New("bridge: version is older than the room's change history")
)

// HistoryEntry is one applied change.
type HistoryEntry struct {
	Seq     uint64
	At      time.Time
	Change  ydoc.Change
	Authors []string
	Initial bool // the document arriving in a (re)sync, not anybody's edit
}

// maxHistory bounds the change log of a room (every keystroke of a human is one entry).
const maxHistory = 4096

type history struct {
	epoch   string
	seq     uint64
	entries []HistoryEntry
}

func newHistory() *history {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return &history{epoch: hex.EncodeToString(b[:])}
}

func (h *history) record(c ydoc.Change, authors []string, at time.Time, initial bool) uint64 {
	h.seq++
	if len(h.entries) >= maxHistory {
		// drop the oldest quarter at once: amortised O(1)
		n := copy(h.entries, h.entries[maxHistory/4:])
		clear(h.entries[n:])
		h.entries = h.entries[:n]
	}
	h.entries = append(h.entries, HistoryEntry{Seq: h.seq, At: at, Change: c, Authors: authors, Initial: initial})
	return h.seq
}

func (h *history) version() Version { return h.versionAt(h.seq) }

func (h *history) versionAt(seq uint64) Version {
	return Version(h.epoch + "-" + strconv.FormatUint(seq, 10))
}

func (h *history) parse(v Version) (uint64, error) {
	epoch, n, ok := strings.Cut(string(v), "-")
	if !ok {
		return 0, fmt.Errorf("version %q is malformed: %w", v, ErrUnknownVersion)
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil || epoch != h.epoch || seq > h.seq {
		return 0, fmt.Errorf("version %q: %w", v, ErrUnknownVersion)
	}
	return seq, nil
}

// entriesSince returns the entries applied after version v.
func (h *history) entriesSince(v Version) ([]HistoryEntry, error) {
	seq, err := h.parse(v)
	if err != nil {
		return nil, err
	}
	if seq == h.seq {
		return nil, nil
	}
	if len(h.entries) == 0 || h.entries[0].Seq > seq+1 {
		return nil, fmt.Errorf("version %q: %w", v, ErrVersionTooOld)
	}
	i := int(seq + 1 - h.entries[0].Seq)
	return h.entries[i:], nil
}

// History is the room's change log, handed to functions that run in the room goroutine (Read,
// Apply). It must not be kept after the function returns.
type History struct{ h *history }

// Version is the version of the replica right now.
func (h History) Version() Version { return h.h.version() }

// Since merges every change applied after v. It fails with ErrUnknownVersion or
// ErrVersionTooOld when it cannot tell.
func (h History) Since(v Version) (ydoc.Change, error) {
	entries, err := h.h.entriesSince(v)
	if err != nil {
		return ydoc.Change{}, err
	}
	var merged ydoc.Change
	for _, e := range entries {
		merged.Merge(e.Change)
	}
	return merged, nil
}

// Entries returns the changes applied after v, oldest first (copies).
func (h History) Entries(v Version) ([]HistoryEntry, error) {
	entries, err := h.h.entriesSince(v)
	return append([]HistoryEntry(nil), entries...), err
}

// Recent returns up to n of the latest changes, oldest first (copies).
func (h History) Recent(n int) []HistoryEntry {
	e := h.h.entries
	if n < len(e) {
		e = e[len(e)-n:]
	}
	return append([]HistoryEntry(nil), e...)
}
