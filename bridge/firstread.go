package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// First reads from the file. Joining a notebook's room waits for the server to load the file into
// it — half a second for 1,000 cells, seconds for more — while the file itself can be read at
// once. OpenForRead starts the join and reads the file beside it: the first of the two to be ready
// answers. A read from the file shows the notebook as its file holds it (the server's contents
// API, the file as it is on disk): what the room will hold unless someone has changes the server
// has not saved, marked as such for the agent. Edits wait for the room (Open).
//
// A cell's id in the file is the room's only where the server keeps it: jupyter-server gives a
// cell without an id, or with an id an earlier cell has, a new random one when it loads the file
// (nbformat's upgrade and repairs; jupyter_ydoc for files of nbformat < 4.5). FileRead leaves those
// ids empty: the room's are not known until it has loaded.

// NotebookTextServer is implemented by a Server that can read a notebook file's JSON as it is on
// disk (without the server's upgrade and repairs of it).
type NotebookTextServer interface {
	NotebookText(ctx context.Context, path string) ([]byte, error)
}

// FileRead is a notebook as its file holds it, read while its room was joined.
type FileRead struct {
	Notebook ydoc.Notebook // cells whose id the room will not share have ID ""
	NoIDs    int           // how many cells have no id yet
	Took     time.Duration // how long the read took
}

// idlessReadWait is how long a first read waits for the room when the file's cells lack ids the
// room will share (nbformat < 4.5, mostly): a read from the file could not name them, so it is
// worth waiting for the room longer.
const idlessReadWait = 2 * time.Second

// joinHeadStart bounds how long a first read's join waits for the server to answer the file read
// (the file of a notebook of thousands of cells takes the server a few hundred milliseconds).
const joinHeadStart = 2 * time.Second

// errNoFileRead: the server cannot read files as text; joins are awaited.
var errNoFileRead = errors.New("bridge: the server cannot read notebook files as text")

// readNotebookText reads a notebook file as it is on disk, with the ids the server's room will
// share (the others empty). Files of nbformat 3 (the server upgrades them, with new ids) are not
// read here: their rooms are awaited.
// fetched (when not nil) is called once the server has answered, before the sidecar parses the
// answer.
func readNotebookText(ctx context.Context, j Jupyter, path string, fetched func()) (FileRead, error) {
	start := time.Now()
	ts, ok := j.(NotebookTextServer)
	if !ok {
		if fetched != nil {
			fetched()
		}
		return FileRead{}, errNoFileRead
	}
	b, err := ts.NotebookText(ctx, path)
	if fetched != nil {
		fetched()
	}
	if err != nil {
		return FileRead{}, err
	}
	nb, err := ydoc.ParseNBFormat(b)
	if err != nil {
		return FileRead{}, fmt.Errorf("read %s from its file: %w", path, err)
	}
	noIDs := keepTrustedIDs(&nb)
	return FileRead{Notebook: nb, NoIDs: noIDs, Took: time.Since(start)}, nil
}

// keepTrustedIDs empties the ids the server's room will not share (none, or an earlier cell's)
// and returns how many cells have none.
func keepTrustedIDs(nb *ydoc.Notebook) int {
	seen := make(map[string]bool, len(nb.Cells))
	n := 0
	for i := range nb.Cells {
		c := &nb.Cells[i]
		if c.ID != "" && !seen[c.ID] {
			seen[c.ID] = true
			continue
		}
		c.ID = ""
		n++
	}
	return n
}

// firstJoin reports whether the room is joining for the first time, or loading what it first
// joined: what it holds is the file as the server loaded it, nothing more.
func (r *Room) firstJoin() bool {
	info := r.Info()
	if info.Resets > 0 {
		return false
	}
	_, loading := r.prep.loading()
	return info.JoinedAt.IsZero() || loading
}

// readable reports whether a read of the room would answer at once: synced, no load awaited.
func (r *Room) readable() bool {
	select {
	case <-r.done:
		return false
	case <-r.synced:
	default:
		return false
	}
	_, loading := r.prep.loading()
	return !loading
}

// OpenForRead returns a notebook's room when a read of it answers at once. Otherwise it starts
// joining the room (the join goes on after it returns: the next call finds the room) and returns
// the room if it is readable within FirstReadWait (idlessReadWait when cells of the file have no
// id the room will share), else the notebook as its file holds it, as soon as it has been read
// (or the room, if it is readable first). A file that cannot be
// read that way (nbformat 3, not JSON, a server without the contents API's text reads) leaves
// the answer to the room.
func (m *Manager) OpenForRead(ctx context.Context, path string) (*Room, *FileRead, error) {
	path, err := CleanPath(path)
	if err != nil {
		return nil, nil, err
	}
	r := m.Get(path, ydoc.KindNotebook)
	if r != nil && r.readable() {
		r.touch()
		m.hits.Add(1)
		m.touch(CurrentString(path, ydoc.KindNotebook))
		return r, nil, nil
	}
	_, textReads := m.opts.Jupyter.(NotebookTextServer)
	if !textReads || m.opts.FirstReadWait < 0 || r != nil && !isStopped(r) && !r.firstJoin() || m.refused.recent(path, m.opts.Now()) {
		// A file the server just refused is not read from the file again: the join says why.
		// Not a first read: a room the sidecar holds may have changes the file lacks.
		r, err := m.Open(ctx, path, ydoc.KindNotebook)
		return r, nil, err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel() // the file read is this call's: it ends with it
	file := &sharedRead{done: make(chan struct{})}
	fetched := make(chan struct{})
	go func() {
		defer close(file.done)
		file.fr, file.err = readNotebookText(fctx, m.opts.Jupyter, path, func() { close(fetched) })
	}()
	type joined struct {
		r   *Room
		err error
	}
	joinc := make(chan joined, 1)
	m.mu.Lock()
	if m.life.Err() != nil {
		m.mu.Unlock()
		return nil, nil, ErrManagerStopped
	}
	m.wg.Add(1) // the join is the manager's: it goes on after this call
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		// The join waits for the server to have answered the file read (at most joinHeadStart):
		// jupyter-server serves both from one event loop, and a room loading a large notebook holds
		// it for seconds, so the read would wait for the load it is meant to spare the agent.
		head := time.NewTimer(joinHeadStart)
		select {
		case <-fetched:
		case <-head.C:
		case <-m.life.Done():
		}
		head.Stop()
		jctx, cancel := context.WithTimeout(m.life, m.opts.JoinTimeout)
		defer cancel()
		r, err := m.open(jctx, path, ydoc.KindNotebook, func(r *Room) { m.handOver(r, file) }, false)
		if isPermanent(err) {
			m.refused.add(path, m.opts.Now()) // a read from the file may have answered: the next read must say it
		}
		joinc <- joined{r, err}
	}()
	start := time.Now()
	grace := time.NewTimer(m.opts.FirstReadWait)
	defer grace.Stop()
	filed := file.done
	var answer *FileRead // read, waiting for the grace to end
	var joinErr error    // the join gave up, but not for good
	waited := false      // the grace ended
	for {
		select {
		case j := <-joinc:
			if j.err != nil && (isPermanent(j.err) || filed == nil && answer == nil) {
				return nil, nil, j.err
			}
			if j.err != nil { // the join gave up (a room too large to load within JoinTimeout): the file may not
				joinc, joinErr = nil, j.err
				if answer != nil {
					return nil, answer, nil
				}
				continue
			}
			if j.r.readable() || filed == nil && answer == nil {
				return j.r, nil, nil // readable now, or the file could not be read: its read awaits the load
			}
			joinc = nil // joined, still loading: the file answers first
			if answer != nil {
				return nil, answer, nil
			}
		case <-filed:
			filed = nil
			if file.err != nil {
				if ctx.Err() != nil {
					return nil, nil, fmt.Errorf("open %s: %w", path, ctx.Err())
				}
				m.log.Debug().Err(file.err).Str("path", path).Msg("a first read waits for the room: the file could not be read as a notebook")
				if joinErr != nil {
					return nil, nil, joinErr
				}
				if joinc == nil { // joined, still loading: the room answers (its read awaits the load)
					r, err := m.Open(ctx, path, ydoc.KindNotebook)
					return r, nil, err
				}
				continue
			}
			fr := file.fr
			if joinc == nil || waited && fr.NoIDs == 0 {
				return nil, &fr, nil
			}
			answer = &fr
			if fr.NoIDs > 0 { // a read without ids is worth less: the room gets longer
				grace.Reset(max(idlessReadWait, m.opts.FirstReadWait) - time.Since(start))
				waited = false
			}
		case <-grace.C:
			waited = true
			if answer != nil {
				return nil, answer, nil
			}
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("open %s: %w", path, ctx.Err())
		}
	}
}

// sharedRead is a first read's file read, which the join's load wait uses too.
type sharedRead struct {
	done chan struct{} // closed when fr, err are set
	fr   FileRead
	err  error
}

// handOver gives a room started for a first read that read's file, for its load wait to compare
// with (instead of reading the file again); a read that failed leaves the wait to read it.
func (m *Manager) handOver(r *Room, file *sharedRead) {
	done := r.prep.startPrefetch()
	if done == nil {
		return
	}
	m.mu.Lock()
	if m.life.Err() != nil {
		m.mu.Unlock()
		r.prep.endPrefetch(done, nil)
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		var cells []fileCell
		select {
		case <-file.done: // bounded by the first read's call
			if file.err == nil {
				cells = fileCellsOf(file.fr.Notebook)
			}
		case <-m.life.Done():
		}
		r.prep.endPrefetch(done, cells)
	}()
}

// fileCellsOf is what the load wait compares of a notebook read from its file.
func fileCellsOf(nb ydoc.Notebook) []fileCell {
	out := make([]fileCell, len(nb.Cells))
	for i, c := range nb.Cells {
		out[i] = fileCell{id: c.ID, code: c.Type == ydoc.CellCode, outputs: len(c.Outputs)}
	}
	return out
}

// The file read beside a first join: the load wait compares the replica with the file once the
// room has synced, and on jupyter-collaboration's default (non-progressive) load that compare is
// all the wait there is, so the file is read while the server loads the room instead of after.

// prefetchFile reads what the load wait compares of a notebook's file beside the room's first
// join (on the manager's time: it goes on after the caller's call).
func (m *Manager) prefetchFile(r *Room) {
	if r.opts.Kind != ydoc.KindNotebook || r.opts.Transient != "" || r.opts.Fork != "" {
		return
	}
	done := r.prep.startPrefetch()
	if done == nil {
		return
	}
	m.mu.Lock()
	if m.life.Err() != nil {
		m.mu.Unlock()
		r.prep.endPrefetch(done, nil)
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.life, m.opts.JoinTimeout)
		defer cancel()
		cells, err := readFileCells(ctx, m.opts.Jupyter, r.opts.Path)
		if err != nil {
			m.log.Debug().Err(err).Str("path", r.opts.Path).Msg("could not read the file beside the join; the load wait reads it")
		}
		r.prep.endPrefetch(done, cells)
	}()
}

// startPrefetch marks a prefetch as started (nil: one was already).
func (p *readPrep) startPrefetch() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prefetch != nil {
		return nil
	}
	p.prefetch = make(chan struct{})
	return p.prefetch
}

// endPrefetch keeps a prefetch's result (nil: it failed).
func (p *readPrep) endPrefetch(done chan struct{}, cells []fileCell) {
	p.mu.Lock()
	p.prefetched = cells
	p.mu.Unlock()
	close(done)
}

// takePrefetched returns the prefetched file once, waiting for a prefetch in flight; nil when
// there is none (any more).
func (p *readPrep) takePrefetched(ctx context.Context) ([]fileCell, error) {
	p.mu.Lock()
	done := p.prefetch
	p.mu.Unlock()
	if done == nil {
		return nil, nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cells := p.prefetched
	p.prefetched = nil
	return cells, nil
}

// refusals remembers, for a while, the notebooks whose join failed for good after a first read may
// have answered from the file: the server refuses the file (it cannot load it), so the next read
// waits for the join and gives the server's reason instead of the file again.
type refusals struct {
	mu sync.Mutex
	at map[string]time.Time
}

// refusalMemory is how long a refusal is remembered.
const refusalMemory = time.Minute

func (f *refusals) add(path string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	for p, t := range f.at { // forget the old ones: the map stays small
		if now.Sub(t) >= refusalMemory {
			delete(f.at, p)
		}
	}
	f.at[path] = now
}

func (f *refusals) recent(path string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[path]
	return ok && now.Sub(t) < refusalMemory
}
