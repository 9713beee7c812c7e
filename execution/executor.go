package execution

import (
	"context"
	"errors"
)

// Executor is how tools run cells, whatever runs them: start a job over cells of a notebook,
// look a job up or cancel it, interrupt or restart the notebook's kernel, run scratch code. It
// says nothing about how a cell gets to the kernel or how its outputs get into the notebook,
// so one executor can replace another without any change to tools:
//
//   - ClientExecutor (this package) is the kernel's client, as JupyterLab is with
//     jupyter-collaboration: it sends execute requests over the kernel's websocket and writes the
//     outputs into the room itself.
//   - A server-side executor (on jupyter-server-documents, where POST
//     /api/kernels/{id}/execute makes the server run the cell and write its outputs into the
//     document; ServerExecutor) implements the same
//     methods: Start asks the server and records what it reports, and what the document shows,
//     in a Job (NewJob, Job.Update, Job.Finish); Cancel and Interrupt go to the server.
//
// Results are plain values (Job, JobView, CellRun, KernelSession): tools render them. Methods
// are safe for concurrent use. An implementation's lifecycle (Run, Close) belongs to whoever
// wires it (cmd), not to this interface.
type Executor interface {
	// Start queues a job running cells (by id, in order) of the notebook at path and returns at
	// once. Jobs on one notebook run one after the other.
	Start(ctx context.Context, path string, cellIDs []string, opts RunOptions) (*Job, error)
	// Job returns a job by id (ErrUnknownJob once it is forgotten).
	Job(id string) (*Job, error)
	// JobIDs returns the ids of the jobs kept (running and recently finished), newest first.
	JobIDs() []string
	// Cancel stops a job: cells not started are cancelled, the running one is interrupted once
	// the kernel runs it. It returns at once (ErrUnknownJob for an unknown id); the job says
	// when it ended.
	Cancel(ctx context.Context, id string) (*Job, error)
	// Interrupt interrupts the notebook's kernel, whatever it runs (ErrNoKernel without one).
	Interrupt(ctx context.Context, path string) (KernelSession, error)
	// Restart restarts the notebook's kernel; its state is lost (ErrNoKernel without one).
	Restart(ctx context.Context, path string) (KernelSession, error)
	// RunCode runs scratch code in the notebook's kernel without touching the notebook (no
	// outputs written, the execution counter does not move), until it finished or ctx ends
	// (then it goes on in the kernel, no longer watched). The note says what the caller must
	// know about the kernel (it was replaced, it restarted).
	RunCode(ctx context.Context, path, code, kernelName string) (run CellRun, note string, err error)
}

// RunOptions configure a job.
type RunOptions struct {
	StopOnError bool
	KernelName  string // override the notebook's kernelspec when a kernel must be started
	// ForkID runs the cells of a fork of the notebook (outputs go into the fork), in the
	// notebook's kernel.
	ForkID string
}

// Errors an Executor returns.
var (
	// ErrUnknownJob is returned for job ids the executor does not know (or no longer keeps).
	ErrUnknownJob = errors.New("execution: unknown execution job")
	// ErrNoKernel is returned when a notebook has no kernel session.
	ErrNoKernel = errors.New("execution: the notebook has no running kernel")
)

var _ Executor = (*ClientExecutor)(nil)
