package execution

import (
	"context"
	"errors"
	"sort"
)

// Switch is the Executor that hands each call to the executor the server's collaboration engine
// needs (ClientExecutor for jupyter-collaboration, ServerExecutor for jupyter-server-documents),
// chosen per call by Pick: the engine is known only once the server answers, and the sidecar
// may start before the server. Jobs are looked up in every executor. The executors' lifecycles
// (Run, Close) stay with whoever wires them.
type Switch struct {
	// Pick returns the executor for the server's engine (an error when it cannot be told yet).
	Pick func(ctx context.Context) (Executor, error)
	// All lists every executor Pick may return.
	All []Executor
}

var _ Executor = Switch{}

// Start implements Executor.
func (s Switch) Start(ctx context.Context, path string, cellIDs []string, opts RunOptions) (*Job, error) {
	x, err := s.Pick(ctx)
	if err != nil {
		return nil, err
	}
	return x.Start(ctx, path, cellIDs, opts)
}

// Job implements Executor.
func (s Switch) Job(id string) (*Job, error) {
	for _, x := range s.All {
		if j, err := x.Job(id); err == nil {
			return j, nil
		} else if !errors.Is(err, ErrUnknownJob) {
			return nil, err
		}
	}
	if len(s.All) == 0 {
		return nil, ErrUnknownJob
	}
	return s.All[0].Job(id) // the unknown-job error, as the executor words it
}

// JobIDs implements Executor: every executor's jobs, newest first.
func (s Switch) JobIDs() []string {
	var jobs []*Job
	for _, x := range s.All {
		for _, id := range x.JobIDs() {
			if j, err := x.Job(id); err == nil {
				jobs = append(jobs, j)
			}
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Created.After(jobs[b].Created) })
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// Cancel implements Executor: the executor that holds the job cancels it.
func (s Switch) Cancel(ctx context.Context, id string) (*Job, error) {
	for _, x := range s.All {
		if _, err := x.Job(id); err == nil {
			return x.Cancel(ctx, id)
		}
	}
	_, err := s.Job(id)
	return nil, err
}

// Interrupt implements Executor.
func (s Switch) Interrupt(ctx context.Context, path string) (KernelSession, error) {
	x, err := s.Pick(ctx)
	if err != nil {
		return KernelSession{}, err
	}
	return x.Interrupt(ctx, path)
}

// Restart implements Executor.
func (s Switch) Restart(ctx context.Context, path string) (KernelSession, error) {
	x, err := s.Pick(ctx)
	if err != nil {
		return KernelSession{}, err
	}
	return x.Restart(ctx, path)
}

// RunCode implements Executor.
func (s Switch) RunCode(ctx context.Context, path, code, kernelName string) (CellRun, string, error) {
	x, err := s.Pick(ctx)
	if err != nil {
		return CellRun{}, "", err
	}
	return x.RunCode(ctx, path, code, kernelName)
}
