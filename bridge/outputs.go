package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// What a read must not show: outputs the document does not hold yet.
//
//   - jupyter-server-documents with its outputs service on keeps the outputs of notebooks it
//     loads out of the document: each is a placeholder {"output_type", "metadata": {"url":
//     "/api/outputs/{file_id}/{cell_id}/{index}.output"}} (docs/engines.md, "Outputs"). Before a
//     read, the room fetches what the placeholders of its document stand for (OutputServer) and
//     the read shows those outputs; one that cannot be fetched is shown as an output saying so,
//     never as the placeholder.
//   - jupyter-collaboration 5.0 with document_load_progressively streams a notebook it loads
//     into the room after the join, cell after cell, holding back outputs above a size until
//     every cell is in: nothing in the document marks the load as unfinished (the server's
//     DocumentRoom._document_progressively_loaded is not published). What shows it is the
//     loader: the server builds the document under client id 0, so updates from client 0 after
//     the replica synced are the load going on. A read then waits (at most LoadWait) until
//     the replica holds what the file holds — every cell of the file, with outputs where the
//     file has them (the server does not save while it loads: the file is the load's source).

// OutputServer is implemented by a Server that can fetch the output a placeholder stands for.
type OutputServer interface {
	// FetchOutput returns the output at a placeholder's metadata.url.
	FetchOutput(ctx context.Context, url string) (map[string]any, error)
}

// NotebookFileServer is implemented by a Server that can read a notebook file as saved.
type NotebookFileServer interface {
	NotebookFile(ctx context.Context, path string) (ydoc.Notebook, error)
}

const (
	// outputCacheBytes bounds the fetched outputs a room keeps (JSON bytes).
	outputCacheBytes = 64 << 20
	// outputRetry is how long a failed fetch is shown as unavailable before it is tried again.
	outputRetry = 10 * time.Second
	// defaultLoadWait bounds how long a read waits for a progressive load: far below the 60 s
	// after which MCP clients give up on a call.
	defaultLoadWait = 10 * time.Second
	// fetchParallel bounds the placeholders fetched at once.
	fetchParallel = 4
)

// readPrep is what a room's reads wait for: placeholders fetched, a progressive load done. The
// loop reports (placeholders possible, loader active); readers use the rest, under mu.
type readPrep struct {
	mu           sync.Mutex
	placeholders bool   // the engine can leave placeholders in documents
	fileID       string // placeholders of this file only
	outputs      map[string]fetchedOutput
	bytes        int
	resets       int // the room's resets when the cache was filled: a new server document empties it

	loadingSince time.Time     // the loader wrote after the sync (zero: no load going on)
	loaderAt     time.Time     // when the loader last wrote
	expected     []fileCell    // the file, for the load going on
	prefetch     chan struct{} // closed when the file read beside the first join is in (firstread.go)
	prefetched   []fileCell    // that read, for the first load check (nil: none, or used)
}

type fetchedOutput struct {
	out  map[string]any // nil: unavailable
	err  string
	at   time.Time
	size int
}

// onlyLoader reports whether a state vector looks like a document the server has just loaded
// from its file: the loader's items (client 0), plus at most the server room's own client (it
// writes state.path when it loads, dirty and hash when it saves) — nobody has edited it yet. The
// loader may still be streaming it in; a document people worked on is not checked.
func onlyLoader(sv ydoc.StateVector) bool {
	if len(sv) == 0 {
		return true // nothing at all yet: the load has not begun
	}
	_, loader := sv[0]
	return loader && len(sv) <= 2
}

// placeholderURL returns an output's placeholder URL ("" when it is not a placeholder of
// fileID's outputs service).
func placeholderURL(o map[string]any, fileID string) string {
	md, _ := o["metadata"].(map[string]any)
	u, _ := md["url"].(string)
	if fileID == "" || !strings.HasPrefix(u, "/api/outputs/"+fileID+"/") || !strings.HasSuffix(u, ".output") {
		return ""
	}
	return u
}

// engineChanged records what the room joined: whether placeholders can occur, for which file.
func (p *readPrep) engineChanged(e Engine, fileID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.placeholders, p.fileID = e.OutputPlaceholders, fileID
}

// loaderWrote records an update of the server's loader (client 0) after the replica synced.
func (p *readPrep) loaderWrote(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loadingSince.IsZero() {
		p.loadingSince, p.expected = now, nil
	}
	p.loaderAt = now
}

// loaderActive returns when the loader last wrote.
func (p *readPrep) loaderActive() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loaderAt
}

func (p *readPrep) loading() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loadingSince, !p.loadingSince.IsZero()
}

func (p *readPrep) loaded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loadingSince, p.expected = time.Time{}, nil
}

// filter is the read-side substitution of placeholders (ydoc.OutputFilter).
func (p *readPrep) filter() ydoc.OutputFilter {
	p.mu.Lock()
	on, fileID := p.placeholders, p.fileID
	p.mu.Unlock()
	if !on {
		return nil
	}
	return func(_ string, outs []map[string]any) []map[string]any {
		var res []map[string]any
		for i, o := range outs {
			u := placeholderURL(o, fileID)
			if u == "" {
				continue
			}
			if res == nil {
				res = append([]map[string]any(nil), outs...)
			}
			p.mu.Lock()
			f, ok := p.outputs[u]
			p.mu.Unlock()
			switch {
			case ok && f.out != nil:
				res[i] = cloneJSON(f.out)
			case ok:
				res[i] = unavailableOutput(o, u, f.err)
			default:
				res[i] = unavailableOutput(o, u, "not fetched yet")
			}
		}
		if res == nil {
			return outs
		}
		return res
	}
}

// unavailableOutput stands for an output the outputs service did not give: what it is and why.
func unavailableOutput(placeholder map[string]any, url, why string) map[string]any {
	text := fmt.Sprintf("[output not available: %s (%s)]", why, url)
	md := map[string]any{"jupyter_collab_mcp": map[string]any{"unavailable": url}}
	if placeholder["output_type"] == "stream" {
		name, _ := placeholder["name"].(string)
		if name == "" {
			name = "stdout"
		}
		return map[string]any{"output_type": "stream", "name": name, "text": text, "metadata": md}
	}
	return map[string]any{"output_type": "display_data", "data": map[string]any{"text/plain": text}, "metadata": md}
}

func cloneJSON(o map[string]any) map[string]any {
	b, err := json.Marshal(o)
	if err != nil {
		return o
	}
	var c map[string]any
	if json.Unmarshal(b, &c) != nil {
		return o
	}
	return c
}

// prepareRead makes the replica readable: a progressive load awaited, placeholders fetched.
func (r *Room) prepareRead(ctx context.Context) error {
	if r.opts.Transient != "" || r.opts.Kind != ydoc.KindNotebook {
		return nil
	}
	if err := r.awaitLoad(ctx); err != nil {
		return err
	}
	return r.fetchPlaceholders(ctx)
}

// awaitLoad waits while the server's loader is still writing the document, until the replica
// holds what the file holds. Each read waits at most LoadWait, then fails saying what it waited
// for, unless the loader has written nothing for that long: it is done, and the replica, not the
// file, is the document (someone changed it while it loaded).
func (r *Room) awaitLoad(ctx context.Context) error {
	since, loading := r.prep.loading()
	if !loading {
		return nil
	}
	sub := r.Subscribe(64)
	defer sub.Close()
	wait := r.loadWait()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for waited := false; ; waited = true {
		exp, err := r.expectedFile(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.Warn().Err(err).Msg("the server is still loading the notebook, and the file to compare with could not be read: reading what arrived")
			r.prep.loaded()
			return nil
		}
		var m fileMatch
		if err := r.readRaw(ctx, false, func(d *ydoc.Doc, _ History) error {
			if n := d.NumCells(); n < len(exp) { // cheap: the cells are still coming
				m = fileMatch{cells: len(exp), lacking: len(exp) - n}
				return nil
			}
			m = matchFile(d, exp)
			return nil
		}); err != nil {
			return err
		}
		if m.missing() == 0 {
			if waited {
				r.log.Info().Dur("waited", time.Since(since)).Msg("a read waited for the server's progressive load of the notebook")
			}
			r.prep.loaded()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the server to finish loading %s (%s): %w", r.opts.Path, m, ctx.Err())
		case <-deadline.C:
			if quiet := time.Since(r.prep.loaderActive()); quiet >= wait {
				r.log.Warn().Str("missing", m.String()).Dur("loader_quiet", quiet).
					Msg("the server's load stopped short of what the file holds (the document changed while it loaded): reading what the room holds")
				r.prep.loaded()
				return nil
			}
			return fmt.Errorf("the server is still loading %s into its room: waited %s, and %s (read it again in a moment)",
				r.opts.Path, wait.Round(time.Millisecond), m)
		case _, ok := <-sub.C:
			if !ok {
				return r.stoppedErr()
			}
			// The loader writes a cell or an output a transaction: look again once the updates
			// of the moment are in, not after each (every look reads the whole replica).
			if err := drainFor(ctx, sub, loadLookEvery); err != nil {
				return r.stoppedErr()
			}
		}
	}
}

// loadLookEvery is how often a read waiting for a load looks at the replica again.
const loadLookEvery = 20 * time.Millisecond

// drainFor consumes a subscription's events for d (they only say "look again").
func drainFor(ctx context.Context, sub *Subscription, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return nil // the caller's loop reports it
		case _, ok := <-sub.C:
			if !ok {
				return ErrRoomClosed
			}
		}
	}
}

func (r *Room) loadWait() time.Duration {
	if r.opts.LoadWait > 0 {
		return r.opts.LoadWait
	}
	return defaultLoadWait
}

// expectedFile returns the file the load going on comes from (read once per load).
func (r *Room) expectedFile(ctx context.Context) ([]fileCell, error) {
	r.prep.mu.Lock()
	exp := r.prep.expected
	r.prep.mu.Unlock()
	if exp != nil {
		return exp, nil
	}
	exp, err := r.prep.takePrefetched(ctx)
	if exp == nil && err == nil {
		exp, err = readFileCells(ctx, r.opts.Jupyter, r.opts.Path)
	}
	if err != nil {
		return nil, err
	}
	r.prep.mu.Lock()
	if !r.prep.loadingSince.IsZero() {
		r.prep.expected = exp
	}
	r.prep.mu.Unlock()
	return exp, nil
}

// fileCell is what the load wait compares of a file's cell.
type fileCell struct {
	id      string // "" where the room will not share it (firstread.go)
	code    bool
	outputs int
}

// readFileCells reads what the load wait compares of a notebook file: the file as it is on disk
// (the cheaper read: the server neither upgrades nor validates it, and only each cell's id, type
// and number of outputs are decoded), or for files that are not nbformat 4 (nbformat 3) the
// notebook as the server upgrades it.
func readFileCells(ctx context.Context, j Jupyter, path string) ([]fileCell, error) {
	if ts, ok := j.(NotebookTextServer); ok {
		b, err := ts.NotebookText(ctx, path)
		if err != nil {
			return nil, err
		}
		var f struct {
			NBFormat json.Number `json:"nbformat"`
			Cells    []struct {
				ID      any        `json:"id"`
				Type    any        `json:"cell_type"`
				Outputs []struct{} `json:"outputs"`
			} `json:"cells"`
		}
		if err := json.Unmarshal(b, &f); err == nil && f.NBFormat.String() == "4" {
			cells := make([]fileCell, len(f.Cells))
			seen := make(map[string]bool, len(cells))
			for i, c := range f.Cells {
				id, _ := c.ID.(string)
				if seen[id] {
					id = ""
				}
				seen[id] = id != ""
				cells[i] = fileCell{id: id, code: c.Type == ydoc.CellCode, outputs: len(c.Outputs)}
			}
			return cells, nil
		}
	}
	fs, ok := j.(NotebookFileServer)
	if !ok {
		return nil, fmt.Errorf("the server cannot read notebook files")
	}
	nb, err := fs.NotebookFile(ctx, path)
	if err != nil {
		return nil, err
	}
	cells := make([]fileCell, len(nb.Cells))
	for i, c := range nb.Cells {
		cells[i] = fileCell{id: c.ID, code: c.Type == ydoc.CellCode, outputs: len(c.Outputs)}
	}
	return cells, nil
}

// fileMatch is how much of a notebook file a replica holds.
type fileMatch struct {
	cells   int // the file's cells
	lacking int // of them, the replica lacks
	outputs int // code cells the replica holds without the outputs the file gives them
}

func (m fileMatch) missing() int { return m.lacking + m.outputs }

func (m fileMatch) String() string {
	return fmt.Sprintf("%d of the file's %d cells, and the outputs of %d more, have not arrived", m.lacking, m.cells, m.outputs)
}

// matchFile tells which of a notebook file's cells the replica lacks, and which of its code cells
// with outputs the replica holds without them.
//
// A cell's id names it only where the file and the room got it from the same place. jupyter-server
// gives the cells of an nbformat v3 file, and the cells of a v4.5 file that have no id or an id an
// earlier cell has, new random ids on every read (nbformat's upgrade and its validator's repairs),
// so the file read here and the one the server loaded the room from disagree; cells of nbformat
// 4.0–4.4 files have no id at all (the room gives them new ones). So a file cell whose id the
// replica holds is that cell, and the others are matched in order with the replica's cells no
// file id named: the server loads a notebook cell after cell in the file's order, its outputs last.
func matchFile(d *ydoc.Doc, file []fileCell) fileMatch {
	m := fileMatch{cells: len(file)}
	ids, outs := d.CellIDs(), d.OutputCounts()
	if len(ids) != len(outs) {
		return fileMatch{cells: len(file), lacking: len(file)}
	}
	byID := make(map[string]int, len(ids))
	for i, id := range ids {
		if _, dup := byID[id]; !dup && id != "" {
			byID[id] = i
		}
	}
	named := make([]bool, len(ids))
	pair := make([]int, len(file)) // the replica's cell of each file cell, -1 for none yet
	for i, fc := range file {
		pair[i] = -1
		if j, ok := byID[fc.id]; ok && fc.id != "" && !named[j] {
			pair[i], named[j] = j, true
		}
	}
	next := 0 // the replica's next cell no file id named
	for i := range file {
		if pair[i] >= 0 {
			continue
		}
		for next < len(ids) && named[next] {
			next++
		}
		if next < len(ids) {
			pair[i] = next
			next++
		}
	}
	for i, fc := range file {
		switch j := pair[i]; {
		case j < 0:
			m.lacking++
		case fc.code && fc.outputs > 0 && outs[j] == 0:
			m.outputs++
		}
	}
	return m
}

// fetchPlaceholders fetches what the document's placeholders stand for and the cache lacks.
func (r *Room) fetchPlaceholders(ctx context.Context) error {
	fetcher, ok := r.opts.Jupyter.(OutputServer)
	if !ok {
		return nil
	}
	p := r.prep
	p.mu.Lock()
	on, fileID := p.placeholders, p.fileID
	if resets := r.Info().Resets; resets != p.resets { // a new server document: new outputs
		p.outputs, p.bytes, p.resets = nil, 0, resets
	}
	p.mu.Unlock()
	if !on {
		return nil
	}
	var urls []string
	now := time.Now()
	if err := r.readRaw(ctx, false, func(d *ydoc.Doc, _ History) error {
		cells, err := d.Cells(nil)
		if err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range cells {
			for _, o := range c.Outputs {
				u := placeholderURL(o, fileID)
				if u == "" {
					continue
				}
				if f, ok := p.outputs[u]; ok && (f.out != nil || now.Sub(f.at) < outputRetry) {
					continue
				}
				urls = append(urls, u)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if len(urls) == 0 {
		return nil
	}
	sem := make(chan struct{}, fetchParallel)
	var wg sync.WaitGroup
	for _, u := range urls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := fetcher.FetchOutput(ctx, u)
			f := fetchedOutput{out: out, at: time.Now()}
			if err != nil {
				f.out, f.err = nil, err.Error()
				r.log.Warn().Err(err).Str("url", u).Msg("could not fetch an output the document holds as a placeholder")
			} else if b, err := json.Marshal(out); err == nil {
				f.size = len(b)
			}
			p.store(u, f)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// store keeps a fetched output, forgetting others past the cache's bound.
func (p *readPrep) store(u string, f fetchedOutput) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outputs == nil {
		p.outputs = map[string]fetchedOutput{}
	}
	if old, ok := p.outputs[u]; ok {
		p.bytes -= old.size
	}
	for k, v := range p.outputs {
		if p.bytes+f.size <= outputCacheBytes {
			break
		}
		delete(p.outputs, k)
		p.bytes -= v.size
	}
	p.outputs[u] = f
	p.bytes += f.size
}
