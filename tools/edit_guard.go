package tools

import (
	"errors"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Addressing cells and guarding edits, as the tools' arguments say them: which cells a call
// means (ids or an index range), and what it expects of them (the version the caller read,
// source hashes, nobody typing there). The edits check them (ydoc.Guard, bridge.Proposal.Since).

type targetArgs struct {
	CellIDs    []string `json:"cell_ids"`
	StartIndex *int     `json:"start_index"`
	EndIndex   *int     `json:"end_index"`
}

func (t targetArgs) target() ydoc.Target {
	return ydoc.Target{IDs: t.CellIDs, Start: t.StartIndex, End: t.EndIndex}
}

type guardArgs struct {
	ExpectedVersion      string         `json:"expected_version"`
	ExpectedSourceHashes map[string]any `json:"expected_source_hashes"`
	AvoidBusyCells       bool           `json:"avoid_busy_cells"`
}

// guard is what the edit checks before it changes anything: the caller's hashes, and who is
// typing where (busy: the room's awareness as the caller sees it; nil when not asked for).
func (g guardArgs) guard(busy map[string][]string) ydoc.Guard {
	out := ydoc.Guard{Busy: busy, AvoidBusy: g.AvoidBusyCells}
	for id, h := range g.ExpectedSourceHashes {
		if out.Hashes == nil {
			out.Hashes = map[string]string{}
		}
		out.Hashes[id], _ = h.(string)
	}
	return out
}

func (g guardArgs) since() bridge.Version { return bridge.Version(g.ExpectedVersion) }

// resolveIDs addresses cells among the notebook's current cells.
func resolveIDs(cells ydoc.CellOrder, t targetArgs) (indices []int, ids []string, byIndex bool, err error) {
	byIndex = len(t.CellIDs) == 0 && (t.StartIndex != nil || t.EndIndex != nil)
	indices, ids, err = t.target().Resolve(cells)
	var inv *ydoc.InvalidError
	if errors.As(err, &inv) {
		err = invalid(inv.Field, "%s", inv.Msg)
	}
	return indices, ids, byIndex, err
}
