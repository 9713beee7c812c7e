//go:build integration

package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Differential test of ydoc's agent-scoped undo (ydoc/undo.go) against yjs's own UndoManager.
//
// A scenario is a list of steps by an agent and a human on a text file (root Y.Text "source")
// or a notebook (root Y.Array "cells" of cell Y.Maps with a Y.Text "source"). It runs in two
// worlds:
//
//  1. the Go agent (ydoc.Doc, its edits marked tx.Undoable(), Txn.Undo / Txn.Redo) and a yjs
//     human (peer op undoHumanStep), exchanging updates after every step;
//  2. entirely in yjs (peer op undoWorld): an agent Y.Doc with a Y.UndoManager over the same
//     root (its origin tracked, captureTimeout 0) and a human Y.Doc, doing the same operations
//     at the same positions with the same text, and the same undo / redo calls.
//
// Both worlds use the same client ids (so concurrent inserts are ordered the same way), and
// after every step the agent's and the human's contents (the text, or the cells' ids and
// sources), whether an undo/redo did something, and the undo/redo stack depths must agree.
// A human step may be held back from the agent until after the agent's next step (a concurrent
// edit, e.g. typing while the agent undoes).
//
// The Go world drives ydoc exactly as shipped, through its exported API. Where yjs disagrees
// with itself (its replicas diverge, or the same document gives different undos), ydoc does
// what yjs should, and the random test tolerates precisely those cases, each pinned in
// TestDiffUndoYjsKnownBugs.
//
// JCM_UNDO_SEED=n replays a different seed; JCM_UNDO_SCENARIOS=n runs n scenarios per kind.

// undoOp is one operation (see undoApplyOp in node/peer.mjs). Every field is always sent.
type undoOp struct {
	T      string `json:"t"` // ins, del (text of a file or of cell Cell), setSource, insCell, delCell
	Cell   int    `json:"cell"`
	Pos    int    `json:"pos"`
	Len    int    `json:"len"`
	Text   string `json:"text"`
	Del    int    `json:"del"`
	Ins    string `json:"ins"`
	Index  int    `json:"index"`
	Count  int    `json:"count"`
	ID     string `json:"id"`
	Source string `json:"source"`
}

func (o undoOp) String() string {
	switch o.T {
	case "ins":
		return fmt.Sprintf("ins(cell %d, %d, %q)", o.Cell, o.Pos, o.Text)
	case "del":
		return fmt.Sprintf("del(cell %d, %d, %d)", o.Cell, o.Pos, o.Len)
	case "setSource":
		return fmt.Sprintf("setSource(cell %d, at %d del %d ins %q)", o.Cell, o.Pos, o.Del, o.Ins)
	case "insCell":
		return fmt.Sprintf("insCell(%d, %s=%q)", o.Index, o.ID, o.Source)
	case "delCell":
		return fmt.Sprintf("delCell(%d, %d)", o.Index, o.Count)
	}
	return o.T
}

// undoStep is one step of a scenario.
type undoStep struct {
	Side     string   `json:"side"` // agent | human
	Ops      []undoOp `json:"ops"`
	Undoable bool     `json:"undoable"` // agent edits: marked undoable (tracked origin in yjs)
	Undo     bool     `json:"undo"`
	Redo     bool     `json:"redo"`
	Hold     bool     `json:"hold"` // human: reaches the agent only after the agent's next step
}

func (s undoStep) String() string {
	switch {
	case s.Undo:
		return "agent undo"
	case s.Redo:
		return "agent redo"
	}
	var ops []string
	for _, o := range s.Ops {
		ops = append(ops, o.String())
	}
	tag := s.Side
	if s.Side == "agent" && s.Undoable {
		tag += " undoable"
	} else if s.Side == "agent" {
		tag += " plain"
	}
	if s.Hold {
		tag += " (held: concurrent with the next agent step)"
	}
	return tag + ": " + strings.Join(ops, "; ")
}

type undoCell struct {
	ID     string `json:"id"`
	Source string `json:"source"`
}

type undoContent struct {
	Text  string     `json:"text"`
	Cells []undoCell `json:"cells"`
}

func (c undoContent) equal(o undoContent) bool {
	if c.Text != o.Text || len(c.Cells) != len(o.Cells) {
		return false
	}
	return slices.Equal(c.Cells, o.Cells)
}

func (c undoContent) String() string {
	if c.Cells == nil {
		return strconv.Quote(c.Text)
	}
	var parts []string
	for _, x := range c.Cells {
		parts = append(parts, x.ID+"="+strconv.Quote(x.Source))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// undoResult is what a world looks like after a step.
type undoResult struct {
	Agent     undoContent `json:"agent"`
	Human     undoContent `json:"human"`
	Performed *bool       `json:"performed"` // undo/redo steps: whether it changed anything
	Undo      int         `json:"undo"`      // stack depths after the step
	Redo      int         `json:"redo"`
}

func (r undoResult) String() string {
	s := "agent " + r.Agent.String()
	if !r.Human.equal(r.Agent) {
		s += ", human " + r.Human.String()
	}
	if r.Performed != nil {
		s += fmt.Sprintf(", performed %v", *r.Performed)
	}
	return s + fmt.Sprintf(", stacks %d/%d", r.Undo, r.Redo)
}

func (r undoResult) diff(o undoResult) string {
	var d []string
	if !r.Agent.equal(o.Agent) {
		d = append(d, "agent content")
	}
	if !r.Human.equal(o.Human) {
		d = append(d, "human content")
	}
	if (r.Performed == nil) != (o.Performed == nil) || (r.Performed != nil && *r.Performed != *o.Performed) {
		d = append(d, "undo/redo performed")
	}
	if r.Undo != o.Undo || r.Redo != o.Redo {
		d = append(d, "stack depths")
	}
	return strings.Join(d, ", ")
}

// --- world 1: the Go agent and a yjs human ----------------------------------------------------

type goUndoWorld struct {
	ctx   context.Context
	p     *Peer
	key   string
	agent *ydoc.Doc
	held  [][]byte // human updates not yet delivered to the agent
	human undoContent
}

var undoWorldSeq int

func newGoUndoWorld(ctx context.Context, p *Peer, kind ydoc.Kind, agentID, humanID uint32) (*goUndoWorld, error) {
	agent, err := ydoc.NewDoc(kind, agentID, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	undoWorldSeq++
	w := &goUndoWorld{ctx: ctx, p: p, key: strconv.Itoa(undoWorldSeq), agent: agent}
	if err := p.Call(ctx, "undoHumanNew", map[string]any{"key": w.key, "kind": kind.String(), "clientID": humanID}, nil); err != nil {
		return nil, err
	}
	w.human = w.agentContent()
	return w, nil
}

func (w *goUndoWorld) close() {
	_ = w.p.Call(w.ctx, "undoHumanClose", map[string]any{"key": w.key}, nil)
}

func (w *goUndoWorld) agentContent() undoContent {
	if w.agent.Kind() == ydoc.KindText {
		s, _ := w.agent.Text()
		return undoContent{Text: s}
	}
	nb, _ := w.agent.Notebook()
	cells := []undoCell{}
	for _, c := range nb.Cells {
		cells = append(cells, undoCell{ID: c.ID, Source: c.Source})
	}
	return undoContent{Cells: cells}
}

// humanCall applies updates to the human's replica, then its ops (one transaction).
func (w *goUndoWorld) humanCall(updates [][]byte, ops []undoOp) ([][]byte, error) {
	enc := []string{}
	for _, u := range updates {
		enc = append(enc, b64(u))
	}
	if ops == nil {
		ops = []undoOp{}
	}
	var r struct {
		Updates []string    `json:"updates"`
		Content undoContent `json:"content"`
	}
	if err := w.p.Call(w.ctx, "undoHumanStep", map[string]any{"key": w.key, "updates": enc, "ops": ops}, &r); err != nil {
		return nil, err
	}
	w.human = r.Content
	var out [][]byte
	for _, u := range r.Updates {
		b, err := base64Decode(u)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (w *goUndoWorld) deliverHeld() error {
	for _, u := range w.held {
		if _, _, err := w.agent.Apply(u); err != nil {
			return fmt.Errorf("agent applies the human's update: %w", err)
		}
	}
	w.held = nil
	return nil
}

func (w *goUndoWorld) step(s undoStep) (undoResult, error) {
	var res undoResult
	if s.Side == "human" {
		ups, err := w.humanCall(nil, s.Ops)
		if err != nil {
			return res, err
		}
		w.held = append(w.held, ups...)
		if !s.Hold {
			if err := w.deliverHeld(); err != nil {
				return res, err
			}
		}
	} else {
		update, _, err := w.agent.Transact(func(tx *ydoc.Txn) error {
			switch {
			case s.Undo:
				return tx.Undo()
			case s.Redo:
				return tx.Redo()
			}
			if s.Undoable {
				tx.Undoable()
			}
			for _, op := range s.Ops {
				if err := goUndoApply(tx, op); err != nil {
					return fmt.Errorf("%v: %w", op, err)
				}
			}
			return nil
		})
		switch {
		case (s.Undo || s.Redo) && err == nil:
			res.Performed = ptr(true)
		case s.Undo && errors.Is(err, ydoc.ErrNothingToUndo), s.Redo && errors.Is(err, ydoc.ErrNothingToRedo):
			res.Performed = ptr(false)
		case err != nil:
			return res, err
		}
		if err := w.deliverHeld(); err != nil {
			return res, err
		}
		var ups [][]byte
		if update != nil {
			ups = append(ups, update)
		}
		if _, err := w.humanCall(ups, nil); err != nil {
			return res, err
		}
	}
	res.Agent, res.Human = w.agentContent(), w.human
	res.Undo, res.Redo = w.agent.UndoDepth()
	return res, nil
}

func ptr[T any](v T) *T { return &v }

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// goUndoApply performs an agent op with ydoc's Txn API.
func goUndoApply(tx *ydoc.Txn, op undoOp) error {
	switch op.T {
	case "ins":
		if tx.Kind() == ydoc.KindText {
			return tx.InsertText(op.Pos, op.Text)
		}
	case "del":
		if tx.Kind() == ydoc.KindText {
			return tx.DeleteText(op.Pos, op.Len)
		}
	case "setSource":
		c, err := tx.Cell(op.Cell)
		if err != nil {
			return err
		}
		if op.Pos+op.Del > utf16Len(c.Source) {
			return ydoc.ErrOutOfRange
		}
		return tx.SetSource(op.Cell, splice16(c.Source, op.Pos, op.Del, op.Ins))
	case "insCell":
		return tx.InsertCells(op.Index, []ydoc.Cell{{ID: op.ID, Type: ydoc.CellCode, Source: op.Source}})
	case "delCell":
		return tx.DeleteCells(op.Index, op.Count)
	}
	return fmt.Errorf("op %s is not an agent op on a %v", op.T, tx.Kind())
}

// --- world 2: all yjs ---------------------------------------------------------------------------

func yjsUndoWorld(ctx context.Context, p *Peer, kind ydoc.Kind, agentID, humanID uint32, steps []undoStep) ([]undoResult, error) {
	var r struct {
		Results []undoResult `json:"results"`
	}
	err := p.Call(ctx, "undoWorld", map[string]any{"kind": kind.String(), "agentID": agentID, "humanID": humanID, "steps": steps}, &r)
	return r.Results, err
}

// --- scenarios ----------------------------------------------------------------------------------

type undoScenario struct {
	Kind             ydoc.Kind
	AgentID, HumanID uint32
	Steps            []undoStep
}

// run plays a scenario in both worlds; next, when set, generates the steps from the Go world's
// views (and the result is the steps it made). It returns both worlds' results.
func (sc *undoScenario) run(ctx context.Context, p *Peer, next func(agent, human undoContent, depth [2]int) (undoStep, bool)) (goRes, yjsRes []undoResult, err error) {
	goRes, err = sc.runGo(ctx, p, next)
	if err != nil {
		return goRes, nil, err
	}
	yjsRes, err = yjsUndoWorld(ctx, p, sc.Kind, sc.AgentID, sc.HumanID, sc.Steps)
	if err != nil {
		return goRes, nil, fmt.Errorf("yjs world: %w", err)
	}
	return goRes, yjsRes, nil
}

// runGo plays the scenario in the Go world only.
func (sc *undoScenario) runGo(ctx context.Context, p *Peer, next func(agent, human undoContent, depth [2]int) (undoStep, bool)) (goRes []undoResult, err error) {
	w, err := newGoUndoWorld(ctx, p, sc.Kind, sc.AgentID, sc.HumanID)
	if err != nil {
		return nil, err
	}
	defer w.close()
	for i := 0; ; i++ {
		var s undoStep
		if next != nil {
			var ok bool
			u, r := w.agent.UndoDepth()
			if s, ok = next(w.agentContent(), w.human, [2]int{u, r}); !ok {
				break
			}
			sc.Steps = append(sc.Steps, s)
		} else if i < len(sc.Steps) {
			s = sc.Steps[i]
		} else {
			break
		}
		res, err := w.step(s)
		if err != nil {
			return goRes, fmt.Errorf("Go world, step %d (%v): %w", i, s, err)
		}
		goRes = append(goRes, res)
	}
	return goRes, nil
}

// yjsOverDeleted recognises one way yjs's UndoManager disagrees with itself. Items an undo
// re-creates get consecutive clocks and merge into one struct; a later undo of an insertion that
// was re-created follows "redone" to that struct and yjs deletes the whole of it, taking text
// other steps inserted (a plain edit's, or copies of a human's text the agent had deleted) with
// it. ydoc deletes only the copy of the step's own insertion. The signature: an undo step after
// which both sides agree on everything but the text, and yjs's text is Go's with characters
// removed (cell by cell, same cells). Pinned in
// TestDiffUndoYjsKnownBugs/undo_deletes_merged_neighbours.
func yjsOverDeleted(step undoStep, goR, yjsR undoResult) bool {
	if !step.Undo || goR.Undo != yjsR.Undo || goR.Redo != yjsR.Redo || (goR.Performed == nil) != (yjsR.Performed == nil) {
		return false
	}
	if !goR.Agent.equal(goR.Human) || !yjsR.Agent.equal(yjsR.Human) {
		return false
	}
	g, y := goR.Agent, yjsR.Agent
	if len(g.Cells) != len(y.Cells) {
		return false
	}
	fewer := isProperSubsequence(y.Text, g.Text)
	same := y.Text == g.Text
	if !fewer && !same {
		return false
	}
	for k := range g.Cells {
		if g.Cells[k].ID != y.Cells[k].ID {
			return false
		}
		switch {
		case g.Cells[k].Source == y.Cells[k].Source:
		case isProperSubsequence(y.Cells[k].Source, g.Cells[k].Source):
			fewer = true
		default:
			return false
		}
	}
	return fewer
}

// yjsSelfDiverged recognises a step after which yjs's own two replicas differ although every
// update has been delivered. yjs's redoItem finds a re-created item's right neighbour by
// following "redone" from its old right neighbour, but a re-created copy sits left of the item
// it replaces, so that can land on the left neighbour itself: the item's origins are then not
// left and right of each other, and the agent's Y.Doc and every peer that decodes the update
// place it differently (decoding splits the left neighbour to find the right one). ydoc never
// gives an item such origins (ydoc/undo.go, placeInCopy): its replicas must agree with each
// other, on whether anything was done and on the stacks. yjs has no single answer after that
// step, so the rest of the scenario is not compared. Pinned in
// TestDiffUndoYjsKnownBugs/redo_replicas_diverge.
func yjsSelfDiverged(step undoStep, goR, yjsR undoResult) bool {
	if step.Side == "human" && step.Hold {
		return false // the agent has not seen the human's edit yet: differing is expected
	}
	if yjsR.Agent.equal(yjsR.Human) || !goR.Agent.equal(goR.Human) {
		return false
	}
	return (goR.Performed == nil) == (yjsR.Performed == nil) && (goR.Performed == nil || *goR.Performed == *yjsR.Performed) &&
		goR.Undo == yjsR.Undo && goR.Redo == yjsR.Redo
}

// yjsMisplacedRestore recognises the same yjs bug when the replicas happen to agree: the right
// neighbour found by following "redone" lies left of the left neighbour, and yjs puts the
// re-created text elsewhere in the cell it re-creates. The signature: an undo or redo that
// re-created cells, after which both worlds agree on everything except the text of re-created
// cells; Go's text of each is exactly what the cell held when it was deleted (Go's view the last
// step it existed), and yjs's holds the same characters in another order. Pinned in
// TestDiffUndoYjsKnownBugs/restored_cell_scrambled.
func yjsMisplacedRestore(steps []undoStep, i int, goRes, yjsRes []undoResult) bool {
	goR, yjsR := goRes[i], yjsRes[i]
	if !(steps[i].Undo || steps[i].Redo) || i == 0 || goR.Undo != yjsR.Undo || goR.Redo != yjsR.Redo ||
		(goR.Performed == nil) != (yjsR.Performed == nil) || (goR.Performed != nil && *goR.Performed != *yjsR.Performed) {
		return false
	}
	if !goR.Agent.equal(goR.Human) || !yjsR.Agent.equal(yjsR.Human) || len(goR.Agent.Cells) != len(yjsR.Agent.Cells) {
		return false
	}
	misplaced := 0
	for k, g := range goR.Agent.Cells {
		y := yjsR.Agent.Cells[k]
		if g.ID != y.ID {
			return false
		}
		if g.Source == y.Source {
			continue
		}
		if cellSource(goRes[i-1].Agent, g.ID) != nil || !sameRunes(g.Source, y.Source) {
			return false // not re-created by this step, or not a reordering
		}
		last := (*string)(nil)
		for j := i - 1; j >= 0 && last == nil; j-- {
			last = cellSource(goRes[j].Agent, g.ID)
		}
		if last == nil || *last != g.Source {
			return false
		}
		misplaced++
	}
	return misplaced > 0
}

func cellSource(c undoContent, id string) *string {
	for _, x := range c.Cells {
		if x.ID == id {
			return &x.Source
		}
	}
	return nil
}

// sameRunes reports whether a and b hold the same characters, in any order.
func sameRunes(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	slices.Sort(ra)
	slices.Sort(rb)
	return slices.Equal(ra, rb)
}

// isProperSubsequence reports whether a is b with at least one character removed.
func isProperSubsequence(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	if len(ra) >= len(rb) {
		return false
	}
	j := 0
	for _, r := range rb {
		if j < len(ra) && ra[j] == r {
			j++
		}
	}
	return j == len(ra)
}

// firstDivergence is the first step where the worlds differ (-1: none), and what differs.
func firstDivergence(goRes, yjsRes []undoResult) (int, string) {
	for i := range goRes {
		if i >= len(yjsRes) {
			return i, "yjs world stopped early"
		}
		if d := goRes[i].diff(yjsRes[i]); d != "" {
			return i, d
		}
	}
	return -1, ""
}

func (sc *undoScenario) describe(goRes, yjsRes []undoResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v, agent client %d, human client %d\n", sc.Kind, sc.AgentID, sc.HumanID)
	for i, s := range sc.Steps {
		fmt.Fprintf(&b, "  %2d. %v\n", i, s)
		if i < len(goRes) && i < len(yjsRes) {
			if d := goRes[i].diff(yjsRes[i]); d != "" {
				fmt.Fprintf(&b, "      DIFFERS (%s)\n      Go:  %v\n      yjs: %v\n", d, goRes[i], yjsRes[i])
			} else {
				fmt.Fprintf(&b, "      both: %v\n", goRes[i])
			}
		}
	}
	steps, _ := json.Marshal(sc.Steps)
	fmt.Fprintf(&b, "  steps JSON: %s", steps)
	return b.String()
}

// --- the random generator -----------------------------------------------------------------------

const (
	agentAlphabet = "ABCDEXYZé \n"
	humanAlphabet = "abcdexyzü \n"
)

type undoGen struct {
	r      *rand.Rand
	kind   ydoc.Kind
	nextID int
	// where the agent last inserted: humans like to type inside and around it
	hot struct {
		ok           bool
		cell, pos, n int
	}
}

func (g *undoGen) text(alphabet string, min, max int) string {
	rs := []rune(alphabet)
	n := min + g.r.IntN(max-min+1)
	out := make([]rune, n)
	for i := range out {
		out[i] = rs[g.r.IntN(len(rs))]
	}
	return string(out)
}

// pos picks a position in a text of n units, near the agent's last insertion half the time.
func (g *undoGen) pos(n int, cell int) int {
	if g.hot.ok && g.hot.cell == cell && g.r.IntN(2) == 0 {
		p := g.hot.pos - 1 + g.r.IntN(g.hot.n+3)
		return max(0, min(n, p))
	}
	return g.r.IntN(n + 1)
}

func (g *undoGen) cellID(prefix string) string {
	g.nextID++
	return fmt.Sprintf("%s%d", prefix, g.nextID)
}

// textOp makes an insert or delete on a text of the view (a file, or cell i), applies it to
// the view and returns it.
func (g *undoGen) humanTextOp(v *undoContent, cell int) undoOp {
	src := v.Text
	if g.kind == ydoc.KindNotebook {
		src = v.Cells[cell].Source
	}
	n := utf16Len(src)
	var op undoOp
	if n == 0 || g.r.IntN(5) < 3 {
		op = undoOp{T: "ins", Cell: cell, Pos: g.pos(n, cell), Text: g.text(humanAlphabet, 1, 6)}
		src = splice16(src, op.Pos, 0, op.Text)
	} else {
		p := g.pos(n-1, cell)
		op = undoOp{T: "del", Cell: cell, Pos: p, Len: 1 + g.r.IntN(min(6, n-p))}
		src = splice16(src, op.Pos, op.Len, "")
	}
	if g.kind == ydoc.KindNotebook {
		v.Cells[cell].Source = src
	} else {
		v.Text = src
	}
	return op
}

func (g *undoGen) humanOp(v *undoContent) undoOp {
	if g.kind == ydoc.KindText {
		return g.humanTextOp(v, 0)
	}
	n := len(v.Cells)
	k := g.r.IntN(100)
	switch {
	case n == 0 || k < 12:
		op := undoOp{T: "insCell", Index: g.r.IntN(n + 1), ID: g.cellID("h"), Source: g.text(humanAlphabet, 0, 8)}
		v.Cells = append(v.Cells[:op.Index], append([]undoCell{{ID: op.ID, Source: op.Source}}, v.Cells[op.Index:]...)...)
		return op
	case k < 20:
		op := undoOp{T: "delCell", Index: g.r.IntN(n), Count: 1}
		v.Cells = append(v.Cells[:op.Index], v.Cells[op.Index+1:]...)
		return op
	}
	cell := g.r.IntN(n)
	if g.hot.ok && g.hot.cell < n && g.r.IntN(3) > 0 {
		cell = g.hot.cell
	}
	return g.humanTextOp(v, cell)
}

// agentOp makes an agent op valid on the view, applies it to the view and returns it.
func (g *undoGen) agentOp(v *undoContent) undoOp {
	if g.kind == ydoc.KindText {
		n := utf16Len(v.Text)
		if n == 0 || g.r.IntN(10) < 6 {
			op := undoOp{T: "ins", Pos: g.pos(n, 0), Text: g.text(agentAlphabet, 1, 7)}
			v.Text = splice16(v.Text, op.Pos, 0, op.Text)
			g.hot.ok, g.hot.cell, g.hot.pos, g.hot.n = true, 0, op.Pos, utf16Len(op.Text)
			return op
		}
		p := g.pos(n-1, 0)
		op := undoOp{T: "del", Pos: p, Len: 1 + g.r.IntN(min(5, n-p))}
		v.Text = splice16(v.Text, op.Pos, op.Len, "")
		return op
	}
	n := len(v.Cells)
	k := g.r.IntN(100)
	switch {
	case n == 0 || k < 22:
		op := undoOp{T: "insCell", Index: g.r.IntN(n + 1), ID: g.cellID("a"), Source: g.text(agentAlphabet, 0, 8)}
		v.Cells = append(v.Cells[:op.Index], append([]undoCell{{ID: op.ID, Source: op.Source}}, v.Cells[op.Index:]...)...)
		g.hot.ok, g.hot.cell, g.hot.pos, g.hot.n = true, op.Index, 0, utf16Len(op.Source)
		return op
	case k < 36:
		i := g.r.IntN(n)
		c := 1 + g.r.IntN(min(2, n-i))
		v.Cells = append(v.Cells[:i], v.Cells[i+c:]...)
		return undoOp{T: "delCell", Index: i, Count: c}
	}
	cell := g.r.IntN(n)
	if g.hot.ok && g.hot.cell < n && g.r.IntN(2) == 0 {
		cell = g.hot.cell
	}
	old := v.Cells[cell].Source
	for try := 0; ; try++ {
		l := utf16Len(old)
		p := g.pos(l, cell)
		del := 0
		if p < l && g.r.IntN(2) == 0 {
			del = 1 + g.r.IntN(min(4, l-p))
		}
		alphabet := agentAlphabet
		if try > 5 {
			alphabet = strings.ReplaceAll(alphabet, "\n", "")
		}
		ins := g.text(alphabet, 0, 6)
		if del == 0 && ins == "" {
			ins = g.text(alphabet, 1, 3)
		}
		nw := splice16(old, p, del, ins)
		if nw == old {
			continue
		}
		op, single := setSourceEdit(cell, old, nw)
		if !single {
			continue // ydoc's SetSource would diff it line by line: not one edit
		}
		v.Cells[cell].Source = nw
		if op.Ins != "" {
			g.hot.ok, g.hot.cell, g.hot.pos, g.hot.n = true, cell, op.Pos, utf16Len(op.Ins)
		}
		return op
	}
}

// setSourceEdit is the edit ydoc's SetSource makes from old to new when it is a single one
// (common prefix and suffix; the middle is line-diffed only when both sides of it have a newline).
func setSourceEdit(cell int, old, nw string) (undoOp, bool) {
	a, b := []rune(old), []rune(nw)
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	oldMid, newMid := string(a[p:len(a)-s]), string(b[p:len(b)-s])
	single := oldMid == "" || newMid == "" || !strings.Contains(oldMid, "\n") || !strings.Contains(newMid, "\n")
	return undoOp{T: "setSource", Cell: cell, Pos: utf16Len(string(a[:p])), Del: utf16Len(oldMid), Ins: newMid}, single
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// splice16 replaces del UTF-16 units at pos with ins (the alphabets are in the BMP).
func splice16(s string, pos, del int, ins string) string {
	rs := []rune(s)
	return string(rs[:pos]) + ins + string(rs[pos+del:])
}

// scenario returns a step generator: an opening by the human (and perhaps a plain edit by the
// agent), a middle of mixed edits, undos and redos, and an end of undos and redos interleaved
// with the human's typing.
func (g *undoGen) scenario() func(agent, human undoContent, depth [2]int) (undoStep, bool) {
	middle := 6 + g.r.IntN(14)
	end := 4 + g.r.IntN(8)
	i := 0
	lastHeld := false
	return func(agent, human undoContent, depth [2]int) (undoStep, bool) {
		defer func() { i++ }()
		if i == 0 { // the opening text or cells, by the human
			if g.kind == ydoc.KindText {
				return undoStep{Side: "human", Ops: []undoOp{{T: "ins", Text: g.text(humanAlphabet, 4, 20)}}}, true
			}
			var ops []undoOp
			for k := 0; k < 1+g.r.IntN(3); k++ {
				ops = append(ops, undoOp{T: "insCell", Index: k, ID: g.cellID("h"), Source: g.text(humanAlphabet, 0, 12)})
			}
			return undoStep{Side: "human", Ops: ops}, true
		}
		agentEdit := func(undoable bool) undoStep {
			v := agent
			v.Cells = append([]undoCell(nil), agent.Cells...)
			var ops []undoOp
			for k := 0; k < 1+g.r.IntN(3); k++ {
				ops = append(ops, g.agentOp(&v))
			}
			return undoStep{Side: "agent", Ops: ops, Undoable: undoable}
		}
		humanEdit := func() undoStep {
			v := human
			v.Cells = append([]undoCell(nil), human.Cells...)
			var ops []undoOp
			for k := 0; k < 1+g.r.IntN(2); k++ {
				ops = append(ops, g.humanOp(&v))
			}
			hold := g.r.IntN(4) == 0
			lastHeld = hold
			return undoStep{Side: "human", Ops: ops, Hold: hold}
		}
		if lastHeld {
			// the agent acts concurrently with the held human edit: usually an undo or redo
			lastHeld = false
			switch g.r.IntN(4) {
			case 0:
				return agentEdit(true), true
			case 1:
				return undoStep{Side: "agent", Redo: true}, true
			}
			return undoStep{Side: "agent", Undo: true}, true
		}
		if i <= middle {
			k := g.r.IntN(100)
			switch {
			case k < 33:
				return agentEdit(true), true
			case k < 40:
				return agentEdit(false), true
			case k < 68:
				return humanEdit(), true
			case k < 86:
				return undoStep{Side: "agent", Undo: true}, true
			}
			return undoStep{Side: "agent", Redo: true}, true
		}
		if i > middle+end {
			return undoStep{}, false
		}
		if i < middle+end && g.r.IntN(3) == 0 {
			return humanEdit(), true
		}
		if depth[1] > 0 && g.r.IntN(5) < 2 {
			return undoStep{Side: "agent", Redo: true}, true
		}
		return undoStep{Side: "agent", Undo: true}, true
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestDiffUndoRandom: random scenarios on both document kinds, every step compared.
func TestDiffUndoRandom(t *testing.T) {
	seed := uint64(envInt("JCM_UNDO_SEED", 20240611))
	perKind := envInt("JCM_UNDO_SCENARIOS", 150)
	budget := time.Minute
	ctx := ctxT(t, budget+time.Minute)
	p := newPeer(t)
	start := time.Now()
	for _, kind := range []ydoc.Kind{ydoc.KindText, ydoc.KindNotebook} {
		t.Run(kind.String(), func(t *testing.T) {
			failures, steps, ran, known, misplaced := 0, 0, 0, 0, 0
			for n := 0; n < perKind; n++ {
				if time.Since(start) > budget {
					t.Logf("time budget spent after %d scenarios", n)
					break
				}
				r := rand.New(rand.NewPCG(seed, uint64(n)*2+uint64(kind)))
				g := &undoGen{r: r, kind: kind}
				// fixed client ids, the same in both worlds; either may be the smaller
				sc := &undoScenario{Kind: kind, AgentID: 1 + r.Uint32N(1000), HumanID: 1001 + r.Uint32N(1000)}
				if r.IntN(2) == 0 {
					sc.AgentID, sc.HumanID = sc.HumanID, sc.AgentID
				}
				goRes, yjsRes, err := sc.run(ctx, p, g.scenario())
				if err != nil {
					t.Fatalf("scenario %d (seed %d): %v\n%s", n, seed, err, sc.describe(goRes, yjsRes))
				}
				ran++
				steps += len(sc.Steps)
				i, what := firstDivergence(goRes, yjsRes)
				switch {
				case i >= 0 && yjsOverDeleted(sc.Steps[i], goRes[i], yjsRes[i]):
					// A known yjs imprecision, not ours: see yjsOverDeleted.
					known++
					t.Logf("scenario %d (seed %d): at step %d yjs's undo removed more than the step inserted (merged re-created structs); Go removed only the step's own text:\n%s", n, seed, i, sc.describe(goRes, yjsRes))
					i = -1
				case i >= 0 && yjsSelfDiverged(sc.Steps[i], goRes[i], yjsRes[i]):
					// yjs's replicas disagree with each other: see yjsSelfDiverged.
					misplaced++
					t.Logf("scenario %d (seed %d): at step %d yjs's own replicas diverged (a re-created item whose origins are not its neighbours); Go's converge; the rest is not compared:\n%s", n, seed, i, sc.describe(goRes, yjsRes))
					i = -1
				case i >= 0 && yjsMisplacedRestore(sc.Steps, i, goRes, yjsRes):
					misplaced++
					t.Logf("scenario %d (seed %d): at step %d yjs re-created a cell's text out of order (the same origins bug); Go restored what the cell held; the rest is not compared:\n%s", n, seed, i, sc.describe(goRes, yjsRes))
					i = -1
				}
				if i >= 0 {
					failures++
					t.Errorf("scenario %d (seed %d): Go and yjs differ at step %d (%s):\n%s", n, seed, i, what, sc.describe(goRes, yjsRes))
					if failures >= 5 {
						t.FailNow()
					}
				}
			}
			t.Logf("%v: %d scenarios, %d steps, %d divergent, %d with yjs's known over-deletion, %d where yjs misplaced re-created text", kind, ran, steps, failures, known, misplaced)
		})
	}
}

// TestDiffUndoYjsKnownBugs pins the cases where yjs's UndoManager disagrees with itself, and
// what ydoc does instead. TestDiffUndoRandom tolerates exactly these (yjsSelfDiverged,
// yjsMisplacedRestore, yjsOverDeleted); if yjs changes, this test says which tolerance to revisit.
func TestDiffUndoYjsKnownBugs(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	p := newPeer(t)
	human := func(ops ...undoOp) undoStep { return undoStep{Side: "human", Ops: ops} }
	agent := func(ops ...undoOp) undoStep { return undoStep{Side: "agent", Ops: ops, Undoable: true} }
	plain := func(ops ...undoOp) undoStep { return undoStep{Side: "agent", Ops: ops} }
	undo := undoStep{Side: "agent", Undo: true}
	insCell := func(i int, id, src string) undoOp { return undoOp{T: "insCell", Index: i, ID: id, Source: src} }
	delCell := func(i, n int) undoOp { return undoOp{T: "delCell", Index: i, Count: n} }
	ins := func(cell, pos int, s string) undoOp { return undoOp{T: "ins", Cell: cell, Pos: pos, Text: s} }
	setSource := func(cell, pos, del int, s string) undoOp {
		return undoOp{T: "setSource", Cell: cell, Pos: pos, Del: del, Ins: s}
	}
	run := func(t *testing.T, agentID, humanID uint32, steps ...undoStep) (goLast, yjsLast undoResult) {
		t.Helper()
		sc := &undoScenario{Kind: ydoc.KindNotebook, AgentID: agentID, HumanID: humanID, Steps: steps}
		goRes, yjsRes, err := sc.run(ctx, p, nil)
		if err != nil {
			t.Fatalf("%v\n%s", err, sc.describe(goRes, yjsRes))
		}
		if i, what := firstDivergence(goRes[:len(goRes)-1], yjsRes); i >= 0 {
			t.Fatalf("the worlds differ before the last step, at %d (%s):\n%s", i, what, sc.describe(goRes, yjsRes))
		}
		t.Logf("\n%s", sc.describe(goRes, yjsRes))
		return goRes[len(goRes)-1], yjsRes[len(yjsRes)-1]
	}
	source := func(c undoContent, id string) string {
		if s := cellSource(c, id); s != nil {
			return *s
		}
		return "(no cell " + id + ")"
	}

	// Undoing the agent's delete of a cell whose text holds copies an earlier undo made. yjs
	// finds the right neighbour of the re-created "XD ZZ" by following "redone" from its old
	// right neighbour, which lands on its left neighbour's copy; an item whose origins are one
	// item is placed after it by the agent's Y.Doc and before it by every peer that decodes the
	// update (decoding splits the left neighbour to find the right one). yjs's two replicas
	// disagree; ydoc's agree, on the text the cell had.
	t.Run("redo_replicas_diverge", func(t *testing.T) {
		g, y := run(t, 1474, 541,
			human(insCell(0, "h1", "one\n"), insCell(1, "h2", "b")),
			human(ins(1, 1, "xb")),
			agent(setSource(1, 0, 3, "Y")),
			undo,
			agent(setSource(1, 2, 0, "XD ZZ")),
			agent(delCell(1, 1)),
			undo)
		if a, h := source(y.Agent, "h2"), source(y.Human, "h2"); a != "bxXD ZZb" || h != "bbxXD ZZ" {
			t.Errorf("yjs: agent %q, human %q; pinned: agent \"bxXD ZZb\", human \"bbxXD ZZ\" (if yjs now converges, drop yjsSelfDiverged)", a, h)
		}
		if a, h := source(g.Agent, "h2"), source(g.Human, "h2"); a != "bxXD ZZb" || h != a {
			t.Errorf("Go: agent %q, human %q; want both \"bxXD ZZb\"", a, h)
		}
	})

	// The same yjs bug with replicas that agree: the re-created "c" copy finds its right
	// neighbour left of its left one and goes to the end. yjs's undo of the delete does not give
	// back the cell yjs had ("ceazüyecüü bayb"); ydoc's does.
	t.Run("restored_cell_scrambled", func(t *testing.T) {
		g, y := run(t, 436, 1198,
			human(insCell(0, "h1", "beayzd bxded"), insCell(1, "h2", "ccüü bayb")),
			agent(delCell(0, 1), setSource(0, 0, 2, "B")),
			undo,
			human(ins(1, 1, "eazüye")),
			human(insCell(1, "h3", "bxbyz")),
			agent(setSource(0, 5, 1, ""), delCell(2, 1)),
			undo)
		const had = "ceazüyecüü bayb"
		if a, h := source(y.Agent, "h2"), source(y.Human, "h2"); a != "ceazüyeüü baybc" || h != a {
			t.Errorf("yjs restored %q / %q; pinned: \"ceazüyeüü baybc\" (if yjs now restores %q, drop yjsMisplacedRestore)", a, h, had)
		}
		if a, h := source(g.Agent, "h2"), source(g.Human, "h2"); a != had || h != had {
			t.Errorf("Go restored %q / %q, want %q", a, h, had)
		}
	})

	// A cell deleted and restored (the document is as before) changes what a later undo removes
	// in yjs: the restore re-creates the agent's "EEB" and the plain "EYXYDC" as copies with
	// consecutive clocks, they merge into one struct, and undoing the "EEB" edit follows
	// "redone" to that struct and deletes all of it. Without the delete and restore, the same
	// undo removes only "EEB". ydoc removes only "EEB" either way.
	t.Run("undo_deletes_merged_neighbours", func(t *testing.T) {
		opening := []undoStep{
			human(insCell(0, "h1", " b\ncxeb"), insCell(1, "h2", "xx")),
			agent(setSource(1, 1, 0, "EEB")),
			plain(setSource(1, 4, 0, "EYXYDC")),
		}
		g, y := run(t, 1267, 138, append(slices.Clone(opening), agent(delCell(0, 2)), undo, undo)...)
		g0, y0 := run(t, 1267, 138, append(slices.Clone(opening), undo)...)
		if a, a0 := source(y.Agent, "h2"), source(y0.Agent, "h2"); a != "xx" || a0 != "xEYXYDCx" {
			t.Errorf("yjs: %q after a delete and restore, %q without; pinned: \"xx\" and \"xEYXYDCx\" (if they agree now, drop yjsOverDeleted)", a, a0)
		}
		for _, r := range []undoResult{g, g0} {
			if a, h := source(r.Agent, "h2"), source(r.Human, "h2"); a != "xEYXYDCx" || h != a {
				t.Errorf("Go: agent %q, human %q; want both \"xEYXYDCx\"", a, h)
			}
		}
	})
}
