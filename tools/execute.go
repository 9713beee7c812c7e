package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/apps"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Execution tools: run cells through the notebook's kernel (the humans see [*], then the outputs
// streaming in, then the count), poll and cancel long runs, interrupt/restart the kernel, run
// scratch code. Results render outputs for a model: text capped, ANSI stripped, images attached
// as image content, downscaled.

// The defaults of the run and output options, written once: the schemas carry them, the
// handler puts them into calls that leave them out (schema.withDefaults), and the instructions
// quote them.
const (
	defaultRunWait     = 30   // seconds a run tool waits for its run (timeout)
	defaultOutputChars = 2000 // characters of each output's text a result shows (max_output_chars)
)

// textRender shows outputs where no call chose how (cancel_execution, resources): text capped
// at the default, images described in a line.
var textRender = renderOpts{maxChars: defaultOutputChars, maxPixels: defaultMaxImagePixels}

var (
	timeoutField = brief("timeout", integer("Seconds to wait for the run. The run itself is not limited: if it outlives the wait, the result says so and gives a job_id to poll.").def(defaultRunWait).min(0).max(3600))
	waitField    = brief("wait", boolean("Wait for the run (up to timeout); false returns its job_id at once.").def(true))
	stopField    = brief("stop_on_error", boolean("Stop at the first cell that raises; the rest are skipped.").def(true))
	outCapField  = brief("max_output_chars", integer("Upper bound of each output's text in characters (the full output stays in the notebook).").def(defaultOutputChars).min(0).max(1000000))
	imagesField  = brief("include_images", boolean("Attach image outputs (PNG, JPEG) as images; false replaces each with a one-line description.").def(true))
	pixelsField  = brief("max_image_pixels", integer("Images larger than this many pixels are downscaled (default about 800×600).").def(defaultMaxImagePixels).min(1024).max(16_000_000))
	kernelField  = brief("kernel_name", str("Kernel to start when the notebook has none (default: the notebook's kernelspec)."))
	jobIDField   = brief("job_id", str("The job_id a run returned."))
)

func (s *Server) registerExecutionTools() {
	runProps := func(extra ...prop) *schema {
		props := append([]prop{pathField}, extra...)
		props = append(props, timeoutField, stopField, waitField, outCapField, imagesField, pixelsField, kernelField)
		return object(props...).required("path")
	}
	s.register(&operation{
		Name:     "batch_execute_notebook_cells",
		Title:    "Run cells",
		Category: "execution",
		Default:  true,
		Scope:    auth.ScopeExecute,
		Task:     true,
		Description: "Run cells in order in the notebook's kernel, as Shift-Enter would (collaborators see [*], then " +
			"the outputs), and return each cell's status and outputs. A run longer than timeout goes on and returns " +
			"a job_id for get_execution.",
		Input: runProps(
			cellIDsField("The cells to run, in order."),
			startIndexField,
			endIndexField,
		),
		Example:  map[string]any{"path": "analysis/report.ipynb", "cell_ids": []any{"a1b2", "c3d4"}, "timeout": 60},
		Forkable: true, Budgeted: true,
		Doc: docRef{Arg: "path", Ref: refNotebook, Open: true, Cells: []string{"cell_ids"}},
		Run: handle(s.batchExecute, s.renderJobRun),
		App: apps.Outputs.URI,
	})
	s.register(&operation{
		Name:        "execute_notebook_cell",
		Title:       "Run a cell",
		Category:    "execution",
		Default:     true,
		Scope:       auth.ScopeExecute,
		Task:        true,
		Description: "Run one cell and return its outputs; as batch_execute_notebook_cells.",
		Input:       runProps(brief("cell_id", str("The cell to run (id or handle)."))).required("path", "cell_id"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "cell_id": "a1b2"},
		Forkable:    true, Budgeted: true,
		Doc: docRef{Arg: "path", Ref: refNotebook, Open: true, Cells: []string{"cell_id"}},
		Run: handle(s.batchExecute, s.renderJobRun),
		App: apps.Outputs.URI,
	})
	s.register(&operation{
		Name:        "get_execution",
		Title:       "Check a run",
		Category:    "execution",
		Default:     true,
		Scope:       auth.ScopeRead,
		Description: "A run's state and outputs by job_id, waiting up to timeout seconds for it to finish.",
		Input: object(
			jobIDField,
			brief("timeout", integer("Seconds to wait for the run to finish (0: answer at once).").def(0).min(0).max(3600)),
			outCapField, imagesField, pixelsField,
		).required("job_id"),
		Example:  map[string]any{"job_id": "job-3f2a9c1b7d4e5f60", "timeout": 10},
		ReadOnly: true, Idempotent: true, Budgeted: true,
		Doc: jobDoc,
		Run: handle(s.getExecution, s.renderJobRun),
		App: apps.Outputs.URI,
	})
	s.register(&operation{
		Name:        "cancel_execution",
		Title:       "Cancel a run",
		Category:    "execution",
		Default:     true,
		Scope:       auth.ScopeExecute,
		Description: "Cancel a run: cells not started are skipped, the running one is interrupted.",
		Input:       object(jobIDField).required("job_id"),
		Example:     map[string]any{"job_id": "job-3f2a9c1b7d4e5f60"},
		Destructive: true, Idempotent: true,
		Doc: jobDoc,
		Run: handle(s.cancelExecution, s.renderJobRun),
	})
	s.register(&operation{
		Name:        "interrupt_kernel",
		Title:       "Interrupt the kernel",
		Category:    "kernels",
		Scope:       auth.ScopeAdmin,
		Description: "Interrupt the notebook's kernel, whatever it is running (the humans' runs too).",
		Input:       object(pathField).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb"},
		Destructive: true, Idempotent: true,
		Doc: kernelDoc,
		Run: handle(s.interruptKernel, renderKernel),
	})
	s.register(&operation{
		Name:        "restart_kernel",
		Title:       "Restart the kernel",
		Category:    "kernels",
		Scope:       auth.ScopeAdmin,
		Description: "Restart the notebook's kernel: every variable is lost, for the humans working in it too.",
		Input:       object(pathField).required("path"),
		Example:     map[string]any{"path": "analysis/report.ipynb"},
		Destructive: true,
		Doc:         kernelDoc,
		Run:         handle(s.restartKernel, renderKernel),
	})
	s.register(&operation{
		Name:     "execute_code",
		Title:    "Run scratch code",
		Category: "execution",
		Default:  true,
		Scope:    auth.ScopeExecute,
		Description: "Run code in the notebook's kernel without writing it into the notebook: to inspect a variable, " +
			"check a shape or try an idea.",
		Input: object(
			pathField,
			brief("code", str("The code to run.")),
			timeoutField, outCapField, imagesField, pixelsField, kernelField,
		).required("path", "code"),
		Example:     map[string]any{"path": "analysis/report.ipynb", "code": "df.shape"},
		Destructive: false, Budgeted: true,
		Doc: kernelDoc,
		Run: handle(s.executeCode, s.renderCode),
	})
}

var (
	// jobDoc is the notebook of the tools that take a job: the door resolves the job to it.
	jobDoc = docRef{Arg: "job_id", Ref: refJob}
	// kernelDoc is the notebook whose kernel a tool uses (the executor joins it).
	kernelDoc = docRef{Arg: "path", Ref: refNotebook}
)

// execArgs are the arguments of the run tools (and of edits that run what they changed). The
// options a tool's schema has come with their defaults (schema.withDefaults).
type execArgs struct {
	CellIDs        []string `json:"cell_ids"`
	CellID         string   `json:"cell_id"`
	StartIndex     *int     `json:"start_index"`
	EndIndex       *int     `json:"end_index"`
	Timeout        int      `json:"timeout"`
	StopOnError    bool     `json:"stop_on_error"`
	Wait           bool     `json:"wait"`
	MaxOutputChars int      `json:"max_output_chars"`
	IncludeImages  bool     `json:"include_images"`
	MaxImagePixels int      `json:"max_image_pixels"`
	KernelName     string   `json:"kernel_name"`
	Code           string   `json:"code"`
	JobID          string   `json:"job_id"`
}

func (a execArgs) render() renderOpts {
	return renderOpts{maxChars: a.MaxOutputChars, images: a.IncludeImages, maxPixels: a.MaxImagePixels}
}

func (a execArgs) timeout() time.Duration { return time.Duration(a.Timeout) * time.Second }

func (s *Server) executor() (execution.Executor, error) {
	if s.opts.Executor == nil {
		return nil, failf("execution is not available on this server")
	}
	return s.opts.Executor, nil
}

// jobRun is a job as a call leaves it: its state, what to tell the model, how to show outputs.
type jobRun struct {
	view execution.JobView
	note string
	opts renderOpts
}

func (s *Server) renderJobRun(_ *call, _ execArgs, j jobRun) result { return s.renderJob(j) }

func (s *Server) batchExecute(ctx context.Context, c *call, a execArgs) (jobRun, error) {
	if a.CellID != "" { // execute_notebook_cell
		a.CellIDs = []string{a.CellID}
	}
	if _, err := s.executor(); err != nil {
		return jobRun{}, err
	}
	var ids []string
	if err := c.Room.View(ctx, func(d *ydoc.Doc) error {
		var err error
		_, ids, _, err = resolveIDs(d, targetArgs{CellIDs: a.CellIDs, StartIndex: a.StartIndex, EndIndex: a.EndIndex})
		return err
	}); err != nil {
		return jobRun{}, err
	}
	return s.runAndWait(ctx, c, ids, a)
}

// runAndWait starts a job on the call's notebook (or fork) and waits for it (sending
// progress), up to the timeout.
func (s *Server) runAndWait(ctx context.Context, c *call, ids []string, a execArgs) (jobRun, error) {
	x, err := s.executor()
	if err != nil {
		return jobRun{}, err
	}
	job, err := x.Start(ctx, c.Path, ids, execution.RunOptions{StopOnError: a.StopOnError, KernelName: a.KernelName, ForkID: c.Fork})
	if err != nil {
		return jobRun{}, err
	}
	if !a.Wait {
		return jobRun{view: job.View(), opts: a.render(), note: "started; poll get_execution with this job_id, or cancel_execution"}, nil
	}
	return s.waitJob(ctx, job, a.timeout(), a.render()), nil
}

func (s *Server) waitJob(ctx context.Context, job *execution.Job, wait time.Duration, r renderOpts) jobRun {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	progress := newProgress(ctx)
	// A tick keeps notifications coming while a cell is silent (clients reset their timeouts
	// on progress).
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	start := time.Now()
	for {
		changed := job.Changed()
		select {
		case <-job.Done(): // first: a finished job is never "still running" (select picks at random)
			return jobRun{view: job.View(), opts: r}
		default:
		}
		select {
		case <-job.Done():
			return jobRun{view: job.View(), opts: r}
		case <-deadline.C:
			return jobRun{view: job.View(), opts: r, note: fmt.Sprintf("still running after %s; it goes on: poll get_execution with this job_id, or cancel_execution", wait)}
		case <-ctx.Done():
			return jobRun{view: job.View(), opts: r, note: "the call ended before the run; it goes on: poll get_execution with this job_id"}
		case <-changed:
			progress.report(job, time.Since(start), false)
		case <-tick.C:
			progress.report(job, time.Since(start), true)
		}
	}
}

func (s *Server) getExecution(ctx context.Context, _ *call, a execArgs) (jobRun, error) {
	job, err := s.job(ctx, a.JobID)
	if err != nil {
		return jobRun{}, err
	}
	return s.waitJob(ctx, job, a.timeout(), a.render()), nil
}

func (s *Server) cancelExecution(ctx context.Context, _ *call, a execArgs) (jobRun, error) {
	x, err := s.executor()
	if err != nil {
		return jobRun{}, err
	}
	if _, err := s.job(ctx, a.JobID); err != nil {
		return jobRun{}, err
	}
	job, err := x.Cancel(ctx, a.JobID)
	if err != nil {
		if errors.Is(err, execution.ErrUnknownJob) {
			return jobRun{}, invalid([]any{"job_id"}, errUnknownJob)
		}
		return jobRun{}, err
	}
	return s.waitJob(ctx, job, 10*time.Second, textRender), nil
}

// kernelActed is a kernel interrupted or restarted.
type kernelActed struct {
	path string
	ks   execution.KernelSession
	note string
}

func (s *Server) interruptKernel(ctx context.Context, c *call, _ execArgs) (kernelActed, error) {
	x, err := s.executor()
	if err != nil {
		return kernelActed{}, err
	}
	ks, err := x.Interrupt(ctx, c.Path)
	return kernelActed{path: c.Path, ks: ks, note: "interrupt sent; a running cell ends with KeyboardInterrupt"}, err
}

func (s *Server) restartKernel(ctx context.Context, c *call, _ execArgs) (kernelActed, error) {
	x, err := s.executor()
	if err != nil {
		return kernelActed{}, err
	}
	ks, err := x.Restart(ctx, c.Path)
	return kernelActed{path: c.Path, ks: ks, note: "kernel restarted; every variable is gone"}, err
}

func renderKernel(c *call, _ execArgs, k kernelActed) result {
	return result{Data: map[string]any{"path": c.args["path"], "kernel_id": k.ks.KernelID, "kernel_name": k.ks.KernelName, "note": k.note}}
}

// codeRun is scratch code run in a notebook's kernel.
type codeRun struct {
	run  execution.CellRun
	note string
}

func (s *Server) executeCode(ctx context.Context, c *call, a execArgs) (codeRun, error) {
	x, err := s.executor()
	if err != nil {
		return codeRun{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	run, note, err := x.RunCode(wctx, c.Path, a.Code, a.KernelName)
	return codeRun{run: run, note: note}, err
}

func (s *Server) renderCode(c *call, a execArgs, r codeRun) result {
	var extra []mcp.Content
	budget := 0
	cell := renderRun(r.run, a.render(), &extra, &budget)
	delete(cell, "cell_id")
	delete(cell, "index")
	out := map[string]any{"path": c.args["path"], "result": cell}
	if r.note != "" {
		out["note"] = r.note
	}
	return result{Data: out, Extra: extra}
}

// renderOpts say how outputs are shown.
type renderOpts struct {
	maxChars  int
	images    bool
	maxPixels int
}

// renderJob renders a job for the model; images go to extra content.
func (s *Server) renderJob(j jobRun) result {
	v, r, note := j.view, j.opts, j.note
	var extra []mcp.Content
	cells := make([]map[string]any, 0, len(v.Cells))
	budget := 0 // bytes of images attached
	for _, c := range v.Cells {
		cells = append(cells, renderRun(c, r, &extra, &budget))
	}
	out := map[string]any{"job_id": v.ID, "path": v.Path, "status": string(v.Status), "cells": cells}
	if !v.Ended.IsZero() {
		out["elapsed_ms"] = v.Ended.Sub(v.Created).Milliseconds()
	} else {
		out["elapsed_ms"] = time.Since(v.Created).Milliseconds()
	}
	if n := strings.Join(slices.DeleteFunc([]string{v.Note, note}, func(s string) bool { return s == "" }), "; "); n != "" {
		out["note"] = n
	}
	return result{Data: out, Extra: extra}
}

// renderRun renders one cell's run; image outputs become image content in extra.
func renderRun(c execution.CellRun, r renderOpts, extra *[]mcp.Content, budget *int) map[string]any {
	out := map[string]any{"cell_id": c.CellID, "index": c.Index, "status": string(c.Status)}
	if c.ExecutionCount != nil {
		out["execution_count"] = *c.ExecutionCount
	}
	if c.Note != "" {
		out["note"] = c.Note
	}
	var outs []map[string]any
	for _, o := range c.Outputs {
		ro := renderOutput(o, r.maxChars)
		if data, ok := o["data"].(map[string]any); ok {
			rdata, _ := ro["data"].(map[string]any)
			for _, mime := range []string{"image/png", "image/jpeg"} {
				b64, ok := data[mime].(string)
				if !ok {
					continue
				}
				if !r.images {
					continue // summarised in one line by renderOutput
				}
				img, err := fitImage(mime, b64, r.maxPixels)
				if err != nil {
					rdata[mime] = fmt.Sprintf("[%s not shown: %v]", mime, err)
					continue
				}
				if *budget+len(img.data) > maxImagesBytes {
					rdata[mime] = fmt.Sprintf("[%s %dx%d not attached: this result already carries %d kB of images; read it with get_execution and fewer cells]", mime, img.orig.X, img.orig.Y, *budget>>10)
					continue
				}
				*budget += len(img.data)
				*extra = append(*extra, mcp.NewImageContent(img.data, img.mime))
				desc := fmt.Sprintf("[%s %dx%d attached as image %d", img.mime, img.orig.X, img.orig.Y, len(*extra))
				if img.size != img.orig {
					desc += fmt.Sprintf(", downscaled to %dx%d", img.size.X, img.size.Y)
				}
				if img.mime != mime {
					desc += fmt.Sprintf(" (the output said %s)", mime)
				}
				rdata[mime] = desc + "]"
			}
		}
		outs = append(outs, ro)
	}
	if len(outs) > 0 {
		out["outputs"] = outs
	}
	return out
}

// progress sends MCP progress notifications when the client asked for them (a progress token
// in the request): at most every 250 ms on changes, and every 5 s while nothing changes. The
// progress value increases with every notification, as the specification requires: cells done,
// plus a growing fraction for the cell running.
type progress struct {
	ctx   context.Context
	token mcp.ProgressToken
	last  time.Time
	value float64
}

type progressKey struct{}

func newProgress(ctx context.Context) *progress {
	token, _ := ctx.Value(progressKey{}).(mcp.ProgressToken)
	return &progress{ctx: ctx, token: token, value: -1}
}

func (p *progress) report(job *execution.Job, elapsed time.Duration, tick bool) {
	if p.token == nil || (!tick && time.Since(p.last) < 250*time.Millisecond) {
		return
	}
	srv := server.ServerFromContext(p.ctx)
	if srv == nil {
		return
	}
	p.last = time.Now()
	sum := job.Summary()
	msg := fmt.Sprintf("%d of %d cells done, %.1fs", sum.Done, sum.Total, elapsed.Seconds())
	if sum.Running >= 0 {
		msg = fmt.Sprintf("running cell %d of %d (%s), %.1fs", sum.Running+1, sum.Total, sum.RunningID, elapsed.Seconds())
		if tail := lastLine(sum.LastOutput); tail != "" {
			msg += ": " + tail
		}
	}
	value := float64(sum.Done)
	if value <= p.value {
		value = p.value + (float64(sum.Done)+1-p.value)/2 // halfway to the next cell
	}
	p.value = value
	_ = srv.SendNotificationToClient(p.ctx, "notifications/progress", map[string]any{
		"progressToken": p.token, "progress": value, "total": sum.Total, "message": msg,
	})
}

func lastLine(text string) string {
	if t := strings.TrimSpace(stripANSI(text)); t != "" {
		lines := strings.Split(t, "\n")
		return oneLine(lines[len(lines)-1], 120)
	}
	return ""
}
