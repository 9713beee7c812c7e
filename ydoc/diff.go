package ydoc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Compact descriptions of what changed between two notebooks or two texts, for people and
// models: which cells were added, removed, moved or edited, and unified line diffs of sources.
// Indices are 0-based cell positions; line numbers in hunk headers are 1-based, as in diff -u.

// DiffOptions shapes text diffs.
type DiffOptions struct {
	Context  int // unchanged lines shown around each change
	MaxLines int // diff lines kept per text (hunk lines, or lines of an added/removed cell's source); <= 0: no limit
}

// DefaultDiffOptions are the options of DiffNotebooks and DiffText.
var DefaultDiffOptions = DiffOptions{Context: 3, MaxLines: 200}

// TextDiff is a unified line diff.
type TextDiff struct {
	Added   int    `json:"added,omitempty"`   // lines added
	Removed int    `json:"removed,omitempty"` // lines removed
	Hunks   []Hunk `json:"hunks,omitempty"`
	// CutLines counts the diff lines left out to respect MaxLines: the hunks shown are then a
	// valid prefix of the diff (their headers count only the lines shown).
	CutLines int `json:"cut_lines,omitempty"`
	// Approximate is set when the texts were too different to align line by line within the
	// cost bound: the changed region is shown as one removed and one added block.
	Approximate bool `json:"approximate,omitempty"`
}

// Hunk is one @@ block. Lines start with ' ' (context), '-' (removed) or '+' (added), without
// their newline; a line "\ No newline at end of file" follows a last line that has none.
type Hunk struct {
	Header    string   `json:"header"` // @@ -FromStart,FromCount +ToStart,ToCount @@
	Lines     []string `json:"lines"`
	FromStart int      `json:"-"` // 1-based; when FromCount is 0, the line after which the hunk applies
	FromCount int      `json:"-"`
	ToStart   int      `json:"-"`
	ToCount   int      `json:"-"`
}

// NoNewlineMarker follows a diff line that has no newline at its end.
const NoNewlineMarker = `\ No newline at end of file`

// Empty reports whether the texts are equal.
func (d TextDiff) Empty() bool { return d.Added == 0 && d.Removed == 0 }

// Unified renders the diff as diff -u does, without file headers.
func (d TextDiff) Unified() string {
	var b strings.Builder
	for _, h := range d.Hunks {
		b.WriteString(h.Header)
		b.WriteByte('\n')
		for _, l := range h.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	if d.CutLines > 0 {
		fmt.Fprintf(&b, "... %d more diff lines\n", d.CutLines)
	}
	return b.String()
}

// DiffText diffs two texts line by line with DefaultDiffOptions.
func DiffText(from, to string) TextDiff { return DiffTextWith(from, to, DefaultDiffOptions) }

// DiffTextWith diffs two texts line by line.
func DiffTextWith(from, to string, opt DiffOptions) TextDiff {
	var d TextDiff
	if from == to {
		return d
	}
	a, b := splitLines(from), splitLines(to)
	ops, approx := diffLines(a, b)
	d.Approximate = approx
	for _, op := range ops {
		switch op.kind {
		case '-':
			d.Removed++
		case '+':
			d.Added++
		}
	}
	hunks := groupHunks(ops, max(opt.Context, 0))
	budget := opt.MaxLines
	for _, g := range hunks {
		h, cut := renderHunk(a, b, ops[g[0]:g[1]], budget, opt.MaxLines > 0)
		if len(h.Lines) > 0 {
			d.Hunks = append(d.Hunks, h)
		}
		d.CutLines += cut
		budget -= len(h.Lines)
	}
	return d
}

// lineOp is one line of an edit script: ' ' keeps a[ai] (= b[bi]), '-' removes a[ai], '+' adds
// b[bi]. ai and bi are always the positions on each side where the op happens (for an added
// line, ai is the number of lines of a before it; for a removed one, bi likewise).
type lineOp struct {
	kind   byte
	ai, bi int
}

// maxDiffEdits bounds the edit distance diffLines searches for (its memory grows with its
// square); maxDiffWork bounds its time, (lines) x (edit distance).
const (
	maxDiffEdits = 2000
	maxDiffWork  = 50_000_000
)

// diffLines computes a line edit script with Myers' algorithm after trimming the common prefix
// and suffix. Beyond the cost bound the middle becomes one removed and one added block
// (approx is then true).
func diffLines(a, b []string) (ops []lineOp, approx bool) {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	for i := 0; i < pre; i++ {
		ops = append(ops, lineOp{' ', i, i})
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	// Intern lines so the inner loop compares ints.
	ids := map[string]int32{}
	intern := func(ls []string) []int32 {
		out := make([]int32, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	ai, bi := intern(am), intern(bm)
	limit := min(maxDiffEdits, len(ai)+len(bi))
	if n := len(ai) + len(bi); n > 0 && limit > maxDiffWork/n {
		limit = maxDiffWork / n
	}
	script, ok := myers(ai, bi, limit)
	if !ok {
		approx = true
		script = script[:0]
		for i := range ai {
			script = append(script, lineOp{'-', i, 0})
		}
		for j := range bi {
			script = append(script, lineOp{'+', 0, j})
		}
	}
	ops = append(ops, script...) // positions are recomputed below
	for i := 0; i < suf; i++ {
		ops = append(ops, lineOp{' ', len(a) - suf + i, len(b) - suf + i})
	}
	ia, ib := 0, 0
	for i := range ops {
		ops[i].ai, ops[i].bi = ia, ib
		if ops[i].kind != '+' {
			ia++
		}
		if ops[i].kind != '-' {
			ib++
		}
	}
	return ops, approx
}

// myers returns a shortest edit script from a to b, or ok false when it needs more than maxD
// edits. Deletions come before insertions within a changed block.
func myers(a, b []int32, maxD int) ([]lineOp, bool) {
	n, m := int32(len(a)), int32(len(b))
	if n == 0 && m == 0 {
		return nil, true
	}
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	var trace [][]int32 // trace[d][k+d]: furthest x on diagonal k after d edits
	for d := 0; d <= maxD; d++ {
		for k := -d; k <= d; k += 2 {
			var x int32
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: an insertion
			} else {
				x = v[off+k-1] + 1 // right: a deletion
			}
			yy := x - int32(k)
			for x < n && yy < m && a[x] == b[yy] {
				x++
				yy++
			}
			v[off+k] = x
			if x >= n && yy >= m {
				trace = append(trace, slices.Clone(v[off-d:off+d+1]))
				return backtrack(trace, int(n), int(m)), true
			}
		}
		trace = append(trace, slices.Clone(v[off-d:off+d+1]))
	}
	return nil, false
}

func backtrack(trace [][]int32, n, m int) []lineOp {
	var rev []lineOp
	x, yy := n, m
	for d := len(trace) - 1; d > 0; d-- {
		prev := trace[d-1] // index k+(d-1)
		at := func(k int) int { return int(prev[k+d-1]) }
		k := x - yy
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		mx := px // where the snake starts, after the edit
		if pk == k-1 {
			mx = px + 1
		}
		for x > mx {
			x--
			yy--
			rev = append(rev, lineOp{' ', x, yy})
		}
		if pk == k+1 {
			rev = append(rev, lineOp{'+', px, py})
		} else {
			rev = append(rev, lineOp{'-', px, py})
		}
		x, yy = px, py
	}
	for x > 0 {
		x--
		yy--
		rev = append(rev, lineOp{' ', x, yy})
	}
	slices.Reverse(rev)
	// Within each changed block, put deletions first, as diff -u does.
	for i := 0; i < len(rev); {
		if rev[i].kind == ' ' {
			i++
			continue
		}
		j := i
		for j < len(rev) && rev[j].kind != ' ' {
			j++
		}
		slices.SortStableFunc(rev[i:j], func(p, q lineOp) int {
			return int(kindRank(p.kind)) - int(kindRank(q.kind))
		})
		i = j
	}
	return rev
}

func kindRank(k byte) int8 {
	if k == '-' {
		return 0
	}
	return 1
}

// groupHunks returns [start, end) ranges of ops, each a hunk: changes with up to context equal
// lines around them, merged when the equal run between two changes is at most 2*context.
func groupHunks(ops []lineOp, context int) [][2]int {
	var out [][2]int
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			eq := end
			for eq < len(ops) && ops[eq].kind == ' ' {
				eq++
			}
			if eq == len(ops) || eq-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = eq
		}
		out = append(out, [2]int{start, end})
		i = end
	}
	return out
}

// renderHunk renders ops as a hunk, keeping at most budget lines when limited, and returns how
// many lines were left out.
func renderHunk(a, b []string, ops []lineOp, budget int, limited bool) (Hunk, int) {
	h := Hunk{}
	cut := 0
	for idx, op := range ops {
		if limited && len(h.Lines) >= budget {
			for _, rest := range ops[idx:] {
				cut++
				if !strings.HasSuffix(opLine(a, b, rest), "\n") {
					cut++ // its marker
				}
			}
			break
		}
		body, nl := strings.CutSuffix(opLine(a, b, op), "\n")
		h.Lines = append(h.Lines, string(op.kind)+body)
		if !nl {
			h.Lines = append(h.Lines, NoNewlineMarker)
		}
		if op.kind != '+' {
			h.FromCount++
		}
		if op.kind != '-' {
			h.ToCount++
		}
	}
	if len(ops) > 0 {
		h.FromStart, h.ToStart = ops[0].ai, ops[0].bi
	}
	if h.FromCount > 0 {
		h.FromStart++
	}
	if h.ToCount > 0 {
		h.ToStart++
	}
	h.Header = fmt.Sprintf("@@ -%s +%s @@", hunkRange(h.FromStart, h.FromCount), hunkRange(h.ToStart, h.ToCount))
	return h, cut
}

func opLine(a, b []string, op lineOp) string {
	if op.kind == '+' {
		return b[op.bi]
	}
	return a[op.ai]
}

func hunkRange(start, count int) string {
	if count == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

// NotebookDiff describes how one notebook became another. Cells are matched by id; cells
// without a usable id (empty, or repeated) are matched by content instead.
type NotebookDiff struct {
	NBFormat *FromTo[string] `json:"nbformat,omitempty"` // "4.4" -> "4.5"
	Metadata []string        `json:"metadata,omitempty"` // notebook metadata keys added, removed or changed
	Added    []CellEntry     `json:"added,omitempty"`    // Index in to
	Removed  []CellEntry     `json:"removed,omitempty"`  // Index in from
	Moved    []CellMove      `json:"moved,omitempty"`
	Changed  []CellEdit      `json:"changed,omitempty"`
}

// FromTo is a value before and after.
type FromTo[T any] struct {
	From T `json:"from"`
	To   T `json:"to"`
}

// CellEntry is an added or removed cell.
type CellEntry struct {
	ID     string `json:"id"`
	Index  int    `json:"index"`
	Type   string `json:"cell_type"`
	Source string `json:"source"`
	// CutLines counts the source lines left out to respect MaxLines.
	CutLines int `json:"cut_lines,omitempty"`
}

// CellMove is a cell that changed places relative to the others (the fewest such cells).
type CellMove struct {
	ID   string `json:"id"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

// CellEdit is a cell present in both notebooks whose content differs.
type CellEdit struct {
	ID             string          `json:"id"`
	Index          int             `json:"index"`  // in to
	Fields         []string        `json:"fields"` // source, cell_type, metadata, outputs, execution_count, attachments
	Type           *FromTo[string] `json:"cell_type,omitempty"`
	Source         *TextDiff       `json:"source,omitempty"`
	Metadata       []string        `json:"metadata,omitempty"` // keys added, removed or changed
	Outputs        *FromTo[int]    `json:"outputs,omitempty"`  // output counts
	ExecutionCount *FromTo[*int]   `json:"execution_count,omitempty"`
	Attachments    []string        `json:"attachments,omitempty"` // names added, removed or changed
}

// Empty reports whether the notebooks are equal (as the document model sees them).
func (d NotebookDiff) Empty() bool {
	return d.NBFormat == nil && len(d.Metadata) == 0 && len(d.Added) == 0 && len(d.Removed) == 0 &&
		len(d.Moved) == 0 && len(d.Changed) == 0
}

// maxSummaryEdits bounds the edited cells Summary names.
const maxSummaryEdits = 5

// Summary is a one-line description, such as
// "2 cells added, 1 removed, 3 edited (c1: source; c4: metadata), 1 moved; notebook metadata changed (kernelspec)".
func (d NotebookDiff) Summary() string {
	if d.Empty() {
		return "no changes"
	}
	var parts []string
	noun := func(n int) string {
		if len(parts) > 0 {
			return strconv.Itoa(n)
		}
		if n == 1 {
			return "1 cell"
		}
		return strconv.Itoa(n) + " cells"
	}
	if n := len(d.Added); n > 0 {
		parts = append(parts, noun(n)+" added")
	}
	if n := len(d.Removed); n > 0 {
		parts = append(parts, noun(n)+" removed")
	}
	if n := len(d.Changed); n > 0 {
		var names []string
		for i, c := range d.Changed {
			if i == maxSummaryEdits {
				names = append(names, fmt.Sprintf("%d more", n-maxSummaryEdits))
				break
			}
			names = append(names, cellLabel(c.ID, c.Index)+": "+strings.Join(c.Fields, ", "))
		}
		parts = append(parts, noun(n)+" edited ("+strings.Join(names, "; ")+")")
	}
	if n := len(d.Moved); n > 0 {
		parts = append(parts, noun(n)+" moved")
	}
	s := strings.Join(parts, ", ")
	var nb []string
	if d.NBFormat != nil {
		nb = append(nb, "nbformat "+d.NBFormat.From+" -> "+d.NBFormat.To)
	}
	if len(d.Metadata) > 0 {
		nb = append(nb, "notebook metadata changed ("+strings.Join(d.Metadata, ", ")+")")
	}
	if len(nb) > 0 {
		if s != "" {
			s += "; "
		}
		s += strings.Join(nb, "; ")
	}
	return s
}

func cellLabel(id string, index int) string {
	if id == "" {
		return "#" + strconv.Itoa(index)
	}
	return id
}

// DiffNotebooks describes how from became to, with DefaultDiffOptions.
func DiffNotebooks(from, to Notebook) NotebookDiff {
	return DiffNotebooksWith(from, to, DefaultDiffOptions)
}

// DiffNotebooksWith describes how from became to.
func DiffNotebooksWith(from, to Notebook, opt DiffOptions) NotebookDiff {
	var d NotebookDiff
	if from.NBFormat != to.NBFormat || from.NBFormatMinor != to.NBFormatMinor {
		d.NBFormat = &FromTo[string]{
			From: fmt.Sprintf("%d.%d", from.NBFormat, from.NBFormatMinor),
			To:   fmt.Sprintf("%d.%d", to.NBFormat, to.NBFormatMinor),
		}
	}
	d.Metadata = changedKeys(from.Metadata, to.Metadata)

	pairs := matchCells(from.Cells, to.Cells) // sorted by to index
	matchedFrom := make([]bool, len(from.Cells))
	matchedTo := make([]bool, len(to.Cells))
	seq := make([]int, len(pairs))
	for i, p := range pairs {
		matchedFrom[p[0]], matchedTo[p[1]] = true, true
		seq[i] = p[0]
	}
	for i, c := range to.Cells {
		if !matchedTo[i] {
			d.Added = append(d.Added, cellEntry(c, i, opt))
		}
	}
	for i, c := range from.Cells {
		if !matchedFrom[i] {
			d.Removed = append(d.Removed, cellEntry(c, i, opt))
		}
	}
	stay := lisMask(seq)
	for i, p := range pairs {
		if !stay[i] {
			d.Moved = append(d.Moved, CellMove{ID: cellID(from.Cells[p[0]], to.Cells[p[1]]), From: p[0], To: p[1]})
		}
		if e, ok := diffCell(from.Cells[p[0]], to.Cells[p[1]], opt); ok {
			e.Index = p[1]
			d.Changed = append(d.Changed, e)
		}
	}
	return d
}

func cellID(a, b Cell) string {
	if b.ID != "" {
		return b.ID
	}
	return a.ID
}

func cellEntry(c Cell, index int, opt DiffOptions) CellEntry {
	e := CellEntry{ID: c.ID, Index: index, Type: c.Type, Source: c.Source}
	if opt.MaxLines > 0 {
		lines := splitLines(c.Source)
		if len(lines) > opt.MaxLines {
			e.Source = strings.Join(lines[:opt.MaxLines], "")
			e.CutLines = len(lines) - opt.MaxLines
		}
	}
	return e
}

// matchCells pairs the cells of two notebooks: by id where the id is usable (non-empty, first
// use), then cells lacking a usable id on at least one side by equal type and source, in order,
// and in each remaining block pairs such cells in order. The result is sorted by to index.
func matchCells(from, to []Cell) [][2]int {
	fromKey := usableIDs(from)
	toKey := usableIDs(to)
	fromIdx := make(map[string]int, len(from))
	for i, c := range from {
		if fromKey[i] {
			fromIdx[c.ID] = i
		}
	}
	var pairs [][2]int
	matchedFrom := make([]bool, len(from))
	matchedTo := make([]bool, len(to))
	for j, c := range to {
		if !toKey[j] {
			continue
		}
		if i, ok := fromIdx[c.ID]; ok {
			pairs = append(pairs, [2]int{i, j})
			matchedFrom[i], matchedTo[j] = true, true
		}
	}
	// Leftovers, in order, aligned by content.
	var lf, lt []int
	for i := range from {
		if !matchedFrom[i] {
			lf = append(lf, i)
		}
	}
	for j := range to {
		if !matchedTo[j] {
			lt = append(lt, j)
		}
	}
	pairable := func(i, j int) bool { return !fromKey[i] || !toKey[j] }
	if len(lf) > 0 && len(lt) > 0 && (slices.Contains(fromKey, false) || slices.Contains(toKey, false)) {
		ka := make([]string, len(lf))
		for x, i := range lf {
			ka[x] = from[i].Type + "\x00" + from[i].Source
		}
		kb := make([]string, len(lt))
		for x, j := range lt {
			kb[x] = to[j].Type + "\x00" + to[j].Source
		}
		ops, _ := diffLines(ka, kb)
		var blockA, blockB []int
		flush := func() {
			next := 0
			for _, i := range blockA {
				for y := next; y < len(blockB); y++ {
					if pairable(i, blockB[y]) {
						pairs = append(pairs, [2]int{i, blockB[y]})
						next = y + 1
						break
					}
				}
			}
			blockA, blockB = blockA[:0], blockB[:0]
		}
		for _, op := range ops {
			switch op.kind {
			case ' ':
				i, j := lf[op.ai], lt[op.bi]
				if pairable(i, j) {
					flush()
					pairs = append(pairs, [2]int{i, j})
				} else {
					blockA, blockB = append(blockA, i), append(blockB, j)
				}
			case '-':
				blockA = append(blockA, lf[op.ai])
			case '+':
				blockB = append(blockB, lt[op.bi])
			}
		}
		flush()
	}
	slices.SortFunc(pairs, func(p, q [2]int) int { return p[1] - q[1] })
	return pairs
}

// usableIDs marks the cells whose id is non-empty and not used by an earlier cell.
func usableIDs(cells []Cell) []bool {
	ok := make([]bool, len(cells))
	seen := make(map[string]bool, len(cells))
	for i, c := range cells {
		if c.ID != "" && !seen[c.ID] {
			ok[i] = true
			seen[c.ID] = true
		}
	}
	return ok
}

// diffCell compares two versions of a cell as the document model keeps them: outputs and
// execution counts of code cells only, attachments of other cells only, execution_state never.
func diffCell(a, b Cell, opt DiffOptions) (CellEdit, bool) {
	e := CellEdit{ID: cellID(a, b)}
	if a.Type != b.Type {
		e.Fields = append(e.Fields, "cell_type")
		e.Type = &FromTo[string]{From: a.Type, To: b.Type}
	}
	if a.Source != b.Source {
		e.Fields = append(e.Fields, "source")
		td := DiffTextWith(a.Source, b.Source, opt)
		e.Source = &td
	}
	if keys := changedKeys(a.Metadata, b.Metadata); len(keys) > 0 {
		e.Fields = append(e.Fields, "metadata")
		e.Metadata = keys
	}
	var ao, bo []map[string]any
	var ac, bc *int
	if a.Type == CellCode {
		ao, ac = a.Outputs, a.ExecutionCount
	}
	if b.Type == CellCode {
		bo, bc = b.Outputs, b.ExecutionCount
	}
	if !modelEqual(outputsForDiff(ao), outputsForDiff(bo)) {
		e.Fields = append(e.Fields, "outputs")
		e.Outputs = &FromTo[int]{From: len(ao), To: len(bo)}
	}
	if !equalCount(ac, bc) {
		e.Fields = append(e.Fields, "execution_count")
		e.ExecutionCount = &FromTo[*int]{From: ac, To: bc}
	}
	var aa, ba map[string]any
	if a.Type != CellCode {
		aa = a.Attachments
	}
	if b.Type != CellCode {
		ba = b.Attachments
	}
	if keys := changedKeys(aa, ba); len(keys) > 0 {
		e.Fields = append(e.Fields, "attachments")
		e.Attachments = keys
	}
	return e, len(e.Fields) > 0
}

// outputsForDiff is an output list as a JSON array, with stream text joined as the document
// model stores it.
func outputsForDiff(outs []map[string]any) []any {
	a := make([]any, len(outs))
	for i, o := range outs {
		if t, ok := o["text"]; ok && o["output_type"] == "stream" {
			if _, isString := t.(string); !isString {
				c := make(map[string]any, len(o))
				for k, v := range o {
					c[k] = v
				}
				c["text"] = joinText(t)
				o = c
			}
		}
		a[i] = o
	}
	return a
}

// changedKeys lists the keys of two JSON objects that were added, removed or changed, sorted.
func changedKeys(a, b map[string]any) []string {
	var keys []string
	for k, av := range a {
		if bv, ok := b[k]; !ok || !modelEqual(av, bv) {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// modelEqual compares JSON-like values as the document model would store them (json.Number,
// every integer type, []string and the like converted as writing them would).
func modelEqual(a, b any) bool { return jsonEqual(modelValue(a), modelValue(b)) }

func modelValue(v any) any {
	if c, err := toAny(v); err == nil {
		return fromAny(c)
	}
	return v
}
