package execution

import (
	"strings"
	"sync"
	"sync/atomic"
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

// Job is one run of cells.
type Job struct {
	ID      string
	Path    string
	Created time.Time

	cancelled   atomic.Bool
	begun       atomic.Bool // the kernel began the running cell's request
	interrupted atomic.Bool // an interrupt was sent for the cancel (once)
	done        chan struct{}

	mu       sync.Mutex
	status   JobStatus
	note     string
	cells    []*CellRun
	kernelID string
	ended    time.Time
	changed  chan struct{} // closed and replaced on every update
}

// JobView is a snapshot of a job.
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
	v := JobView{ID: j.ID, Path: j.Path, Status: j.status, Note: j.note, KernelID: j.kernelID, Created: j.Created, Ended: j.ended}
	for _, c := range j.cells {
		cc := *c
		cc.Outputs = make([]map[string]any, len(c.Outputs))
		for i, o := range c.Outputs {
			cc.Outputs[i] = cloneOutput(o)
		}
		v.Cells = append(v.Cells, cc)
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
	s := JobSummary{Total: len(j.cells), Running: -1}
	for i, c := range j.cells {
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

func (j *Job) update(fn func()) {
	j.mu.Lock()
	fn()
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
}

// RunOptions configure a job.
type RunOptions struct {
	StopOnError bool
	KernelName  string // override the notebook's kernelspec when a kernel must be started
	// ForkID runs the cells of a fork of the notebook (outputs go into the fork), in the
	// notebook's kernel.
	ForkID string
}
