package execution

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// jobBook is what every executor keeps alike, whatever runs its cells: the jobs it keeps for
// polling (running ones, and the last KeepJobs finished ones), and the goroutines Close waits
// for. An executor embeds one (newJobBook) and closes it (close) when it stops.
type jobBook struct {
	keep int              // finished jobs kept
	now  func() time.Time // the executor's clock

	life context.Context // ends when the executor closes: every job's context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	closed   bool // close began: nothing new starts
	jobs     map[string]*trackedJob
	finished []string // ids of finished jobs, oldest first
}

func newJobBook(keep int, now func() time.Time) *jobBook {
	life, stop := context.WithCancel(context.Background())
	return &jobBook{keep: keep, now: now, life: life, stop: stop, jobs: map[string]*trackedJob{}}
}

// trackedJob is a job and what the executor keeps about it.
type trackedJob struct {
	job        *Job
	cellIDs    []string
	cancelC    chan struct{} // closed by Cancel
	cancelOnce sync.Once
}

func (cj *trackedJob) cancelled() bool {
	select {
	case <-cj.cancelC:
		return true
	default:
		return false
	}
}

// track registers work close waits for; it fails once close began.
func (b *jobBook) track() (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("execution: executor stopped")
	}
	b.wg.Add(1)
	return b.wg.Done, nil
}

// goTracked runs fn in a goroutine close waits for (nothing, once close began).
func (b *jobBook) goTracked(fn func()) {
	done, err := b.track()
	if err != nil {
		return
	}
	go func() {
		defer done()
		fn()
	}()
}

// close refuses new work, ends life and waits for every tracked goroutine.
func (b *jobBook) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.stop()
	b.wg.Wait()
}

// start records a job over cells (by id, in order) of the room open returns and runs it (run,
// in a goroutine close waits for). It returns at once.
func (b *jobBook) start(ctx context.Context, cellIDs []string, open func(context.Context) (*bridge.Room, error), run func(*trackedJob, *bridge.Room)) (*Job, error) {
	release, err := b.track()
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			release()
		}
	}()
	room, err := open(ctx)
	if err != nil {
		return nil, err
	}
	var cells []CellRun
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		for _, id := range cellIDs {
			cells = append(cells, CellRun{CellID: id, Index: d.CellIndex(id), Status: CellPending})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	cj := &trackedJob{job: NewJob(newJobID(), room.Path(), cells, b.now()), cellIDs: slices.Clone(cellIDs), cancelC: make(chan struct{})}
	b.mu.Lock()
	b.jobs[cj.job.ID] = cj
	b.mu.Unlock()
	started = true
	go func() {
		defer release()
		run(cj, room)
	}()
	return cj.job, nil
}

func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

// finisher returns the function that ends a job, once (later calls do nothing): it lets the
// notebook go (release), counts the job as finished (retire), and only then tells the job's
// waiters, so that one who starts the next job on being told finds the notebook free.
func (b *jobBook) finisher(j *Job, release func()) func(func(*JobState)) {
	finished := false
	return func(fn func(*JobState)) {
		if finished {
			return
		}
		finished = true
		release()
		b.retire(j)
		j.Finish(fn)
	}
}

// retire counts a job as finished: the oldest finished jobs beyond keep are forgotten.
func (b *jobBook) retire(j *Job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finished = append(b.finished, j.ID)
	for len(b.finished) > b.keep {
		delete(b.jobs, b.finished[0])
		b.finished = b.finished[1:]
	}
}

func (b *jobBook) tracked(id string) (*trackedJob, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cj, ok := b.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w %q (finished jobs are kept for a while, then forgotten)", ErrUnknownJob, id)
	}
	return cj, nil
}

// Job returns a job by id (ErrUnknownJob once it is forgotten).
func (b *jobBook) Job(id string) (*Job, error) {
	cj, err := b.tracked(id)
	if err != nil {
		return nil, err
	}
	return cj.job, nil
}

// JobIDs returns the ids of the jobs kept (running and recently finished), newest first.
func (b *jobBook) JobIDs() []string {
	b.mu.Lock()
	jobs := make([]*Job, 0, len(b.jobs))
	for _, cj := range b.jobs {
		jobs = append(jobs, cj.job)
	}
	b.mu.Unlock()
	sort.Slice(jobs, func(a, c int) bool { return jobs[a].Created.After(jobs[c].Created) })
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// Cancel stops a job: cells not started are cancelled, the running one is interrupted once the
// kernel runs it — never before (until then the kernel may be running someone else's cell). It
// returns at once; wait on the job to see it end.
func (b *jobBook) Cancel(_ context.Context, id string) (*Job, error) {
	cj, err := b.tracked(id)
	if err != nil {
		return nil, err
	}
	cj.cancelOnce.Do(func() { close(cj.cancelC) })
	return cj.job, nil
}
