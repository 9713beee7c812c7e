package execution

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// The transactions a run writes into its cell. Each is built from values fixed when the
// machine asked for it (operations, a copy of the outputs, times), never from the run's live
// state: the room may run a transaction again on a fresh replica after a reset (a write that
// was applied but not yet confirmed), long after the run moved on. Each checks before it changes
// anything, so running it again over a cell that already holds it, or holds something else,
// does no harm: operations that do not fit fail (errOutputsMoved), a rewrite sets the outputs.

var (
	errCellGone     = errors.New("the cell was deleted")
	errOutputsMoved = errors.New("the cell's outputs changed under the run")
)

// Durations of room writes. A write waits this long for the server to confirm it; past that it
// counts as written when the room holds it (it is delivered when the room reconnects), and is
// taken back when the room is not connected (the machine writes it again, with what came since).
const (
	defaultWriteWait = 5 * time.Second
	finalWriteWait   = 10 * time.Second // the last write of a run, also when the sidecar stops
)

// resetTx is the reset JupyterLab does when a cell runs, in one transaction, plus our marker.
func resetTx(cellID string, marker map[string]any, empty bool) func(*ydoc.Txn) error {
	return func(tx *ydoc.Txn) error {
		i := tx.CellIndex(cellID)
		if i < 0 {
			return errCellGone
		}
		if err := tx.ClearOutputs(i); err != nil {
			return err
		}
		if err := tx.SetExecutionCount(i, nil); err != nil {
			return err
		}
		if err := tx.DeleteCellMetadataKey(i, "execution"); err != nil {
			return err
		}
		if empty { // JupyterLab only clears an empty cell
			return tx.SetExecutionState(i, "idle")
		}
		if err := tx.SetExecutionState(i, "running"); err != nil {
			return err
		}
		markers := runMarkers(tx)
		markers[cellID] = marker
		return setRunMarkers(tx, markers)
	}
}

// outputsTx applies w to the cell (see writeOutputs).
func outputsTx(cellID string, w writeOutputs) func(*ydoc.Txn) error {
	return func(tx *ydoc.Txn) error {
		i := tx.CellIndex(cellID)
		if i < 0 {
			return errCellGone
		}
		if w.all != nil {
			return setOutputs(tx, i, w.all)
		}
		if !opsFit(tx, i, w.ops, w.base) {
			return errOutputsMoved
		}
		return applyTxOps(tx, i, w.ops)
	}
}

// beatTx refreshes our marker of the cell, if it is still there.
func beatTx(cellID, instance string, at time.Time) func(*ydoc.Txn) error {
	return func(tx *ydoc.Txn) error {
		markers := runMarkers(tx)
		if m, ok := markers[cellID]; ok && m["instance"] == instance {
			m["beat"] = stamp(at)
			return setRunMarkers(tx, markers)
		}
		return nil
	}
}

// finalTx ends the run in the cell (see finishCell); gone is set when the cell no longer exists.
func finalTx(cellID string, f finishCell, gone *atomic.Bool) func(*ydoc.Txn) error {
	return func(tx *ydoc.Txn) error {
		i := tx.CellIndex(cellID)
		if i >= 0 && !f.gone && f.all != nil && (f.ops == nil || !opsFit(tx, i, f.ops, f.base)) {
			if err := setOutputs(tx, i, f.all); err != nil {
				return err
			}
		} else if i >= 0 && !f.gone && len(f.ops) > 0 {
			if err := applyTxOps(tx, i, f.ops); err != nil {
				return err
			}
		}
		markers := runMarkers(tx)
		if _, ok := markers[cellID]; ok {
			delete(markers, cellID)
			if err := setRunMarkers(tx, markers); err != nil {
				return err
			}
		}
		if i < 0 {
			gone.Store(true)
			return nil
		}
		if f.gone {
			return nil
		}
		// Back to idle with the count, as JupyterLab does on the reply; also when the run was
		// lost, so the cell never stays [*].
		if f.count != nil {
			if err := tx.SetExecutionCount(i, f.count); err != nil {
				return err
			}
		}
		return tx.SetExecutionState(i, "idle")
	}
}

func setOutputs(tx *ydoc.Txn, i int, all []map[string]any) error {
	if err := tx.ClearOutputs(i); err != nil {
		return err
	}
	for _, o := range all {
		if err := tx.InsertOutput(i, cloneOutput(o)); err != nil {
			return err
		}
	}
	return nil
}

func applyTxOps(tx *ydoc.Txn, i int, ops []outputOp) error {
	for _, op := range ops {
		var err error
		switch op.kind {
		case opClear:
			err = tx.ClearOutputs(i)
		case opInsert:
			err = tx.InsertOutput(i, cloneOutput(op.out))
		case opText:
			err = tx.SetStreamText(i, op.index, op.text)
		case opSwap:
			err = tx.ReplaceOutput(i, op.index, cloneOutput(op.out))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// opsFit checks, before changing anything, that the cell's outputs are what the operations
// expect: the count, and a stream of the right kind where text is rewritten.
func opsFit(tx *ydoc.Txn, i int, ops []outputOp, inRoom int) bool {
	n, err := tx.NumOutputs(i)
	if err != nil || n != inRoom {
		return false
	}
	for _, op := range ops {
		if op.kind == opText || op.kind == opSwap {
			if op.index >= n {
				return false
			}
			if op.kind == opText && op.index < inRoom {
				if typ, _, err := tx.OutputKind(i, op.index); err != nil || typ != "stream" {
					return false
				}
			}
		}
		n = op.resize(n)
	}
	return true
}

// applyOps folds output operations into a job's copy of the outputs.
func applyOps(outs []map[string]any, ops []outputOp) []map[string]any {
	for _, op := range ops {
		switch op.kind {
		case opClear:
			outs = nil
		case opInsert:
			outs = append(outs, cloneOutput(op.out))
		case opText:
			if op.index < len(outs) {
				outs[op.index]["text"] = op.text
			}
		case opSwap:
			if op.index < len(outs) {
				outs[op.index] = cloneOutput(op.out)
			}
		}
	}
	return outs
}

func cloneOutputs(outs []map[string]any) []map[string]any {
	c := make([]map[string]any, len(outs))
	for i, o := range outs {
		c[i] = cloneOutput(o)
	}
	return c
}

// applyBounded runs fn as one room transaction, waiting at most wait for the server, and says
// what became of it; applied (if not nil) is called, on the room goroutine, when the
// transaction is in the replica and on its way to the server.
func applyBounded(ctx context.Context, room *bridge.Room, wait time.Duration, fn func(*ydoc.Txn) error, gone *atomic.Bool, applied func()) (writeOutcome, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	edit := ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error { return fn(tx) })
	p, err := room.Propose(wctx, bridge.Proposal{Edit: edit, Applied: applied})
	if err == nil {
		_, err = p.Wait(wctx)
	}
	var unconfirmed *bridge.UnconfirmedError
	var withdrawn *bridge.WithdrawnError
	switch {
	case gone != nil && gone.Load(), errors.Is(err, errCellGone):
		return cellGone, nil
	case err == nil:
		return written, nil
	case errors.Is(err, errOutputsMoved):
		return outputsMoved, nil
	case errors.As(err, &unconfirmed):
		return written, nil
	case errors.As(err, &withdrawn):
		return notApplied, err
	}
	return writeFailed, err
}

// stamp is how times are written in run markers.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
