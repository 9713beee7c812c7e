package execution

import (
	"strings"
	"sync"
	"time"
)

// JobStatus is a job's state.
type JobStatus string

const (
	JobQueued    JobStatus = "queued"    // waiting for an earlier run on the same notebook
	JobRunning   JobStatus = "running"   //
	JobCompleted JobStatus = "completed" // every cell ran without error
	JobFailed    JobStatus = "failed"    // a cell raised, or the kernel was lost
	JobCancelled JobStatus = "cancelled" //
)

// CellStatus is where one cell of a job stands: pending or running, then how it ended.
type CellStatus string

const (
	CellPending   CellStatus = "pending"   // not started yet
	CellRunning   CellStatus = "running"   // reset in the room, sent to the kernel
	CellOK        CellStatus = "ok"        // the kernel replied ok
	CellError     CellStatus = "error"     // the code raised
	CellAborted   CellStatus = "aborted"   // the kernel aborted it, or it was lost with the kernel
	CellCancelled CellStatus = "cancelled" // cancelled before or while running
	CellSkipped   CellStatus = "skipped"   // not code, empty, deleted, or after a failure with stop_on_error
)

// CellRun is what became of one cell of a job (or of one piece of scratch code): a plain value;
// tools decide how to show it.
type CellRun struct {
	CellID         string
	Index          int // the cell's index when the job looked; -1 when it no longer exists
	Status         CellStatus
	ExecutionCount *int             // the kernel's count for the run; nil when it did not reply
	Outputs        []map[string]any // nbformat outputs, as they were written into the cell
	Note           string           // why it ended as it did, when that needs saying
	Started        time.Time        // when it was sent to the kernel (zero: never)
	Ended          time.Time
}

// Job is one run of cells, recorded the same way whatever executor runs them: the executor creates
// it (NewJob), changes it as the run goes (Update) and ends it (Finish); anyone reads it (View,
// Summary) and waits on it (Changed, Done). ID, Path and Created never change. Its methods are
// safe for concurrent use.
type Job struct {
	ID      string
	Path    string
	Created time.Time

	done chan struct{}

	mu       sync.Mutex
	state    JobState
	finished bool
	changed  chan struct{} // closed and replaced on every update
}

// JobState is the changing part of a job, as its executor records it.
type JobState struct {
	Status   JobStatus
	Note     string // about the whole job (a kernel replaced, nothing to run)
	KernelID string
	Cells    []CellRun // in the order they run
	Ended    time.Time
}

// JobView is a snapshot of a job: a deep copy, the caller's to keep.
type JobView struct {
	ID       string
	Path     string
	Status   JobStatus
	Note     string
	KernelID string
	Cells    []CellRun
	Created  time.Time
	Ended    time.Time
}

// NewJob returns a queued job over cells (each pending, or already decided).
func NewJob(id, path string, cells []CellRun, created time.Time) *Job {
	return &Job{ID: id, Path: path, Created: created, done: make(chan struct{}), changed: make(chan struct{}),
		state: JobState{Status: JobQueued, Cells: cells}}
}

// Update changes the job's state under its lock (fn must be short and must not call the job)
// and wakes whoever waits on Changed.
func (j *Job) Update(fn func(*JobState)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fn(&j.state)
	close(j.changed)
	j.changed = make(chan struct{})
}

// Finish is the job's last Update: then Done is closed. Later calls change nothing.
func (j *Job) Finish(fn func(*JobState)) {
	j.mu.Lock()
	if j.finished {
		j.mu.Unlock()
		return
	}
	j.finished = true
	j.mu.Unlock()
	j.Update(fn)
	close(j.done)
}

// Done is closed when the job has finished.
func (j *Job) Done() <-chan struct{} { return j.done }

// Changed returns a channel closed at the job's next update (for progress reports).
func (j *Job) Changed() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}

// View returns a copy of the job's state.
func (j *Job) View() JobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.state
	v := JobView{ID: j.ID, Path: j.Path, Status: st.Status, Note: st.Note, KernelID: st.KernelID, Created: j.Created, Ended: st.Ended}
	for _, c := range st.Cells {
		if c.Outputs != nil {
			c.Outputs = cloneOutputs(c.Outputs)
		}
		v.Cells = append(v.Cells, c)
	}
	return v
}

// JobSummary is a job's progress, cheap to take (no outputs copied).
type JobSummary struct {
	Total, Done int
	Running     int    // index of the cell running, -1 for none
	RunningID   string //
	LastOutput  string // the running cell's last text output, at most its last 500 bytes
}

// Summary returns the job's progress.
func (j *Job) Summary() JobSummary {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := JobSummary{Total: len(j.state.Cells), Running: -1}
	for i, c := range j.state.Cells {
		switch c.Status {
		case CellPending:
		case CellRunning:
			s.Running, s.RunningID = i, c.CellID
			for k := len(c.Outputs) - 1; k >= 0; k-- {
				if t, ok := c.Outputs[k]["text"].(string); ok && strings.TrimSpace(t) != "" {
					if len(t) > 500 {
						t = t[len(t)-500:]
					}
					s.LastOutput = t
					break
				}
			}
		default:
			s.Done++
		}
	}
	return s
}
