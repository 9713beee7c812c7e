package execution_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/execution"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A run must not stall on a room that is away (issue 15, item 6). Writes into the cell wait for
// the server with a bound; while the room reconnects the kernel's outputs keep accumulating in
// the run, the run marker keeps beating, and once the room is back the cell holds every output
// exactly once.

// awaitJobCell waits until the job's copy of a cell satisfies cond.
func awaitJobCell(t *testing.T, j *execution.Job, id, what string, cond func(execution.CellRun) bool) execution.CellRun {
	t.Helper()
	deadline := time.After(testutil.WaitLimit)
	for {
		changed := j.Changed()
		for _, c := range j.View().Cells {
			if c.CellID == id && cond(c) {
				return c
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("job cell %s never %s: %s", id, what, describeJob(j.View()))
		}
	}
}

// stillRunning checks that a job has not finished once d has passed; the tests that call it run
// in a synctest bubble, where d passes in virtual time and is exact.
func stillRunning(t *testing.T, j *execution.Job, d time.Duration, why string) {
	t.Helper()
	time.Sleep(d) // virtual (the test runs in a synctest bubble): every timer due within d fires
	synctest.Wait()
	notDone(t, j, why)
}

// awaitAway waits until the sidecar's room of execPath knows its connection is gone (until then
// a write lands in the replica and is on its way, which is not what these tests are about).
func awaitAway(t *testing.T, e *execEnv) {
	t.Helper()
	room := e.m.Get(execPath, ydoc.KindNotebook)
	if room == nil {
		t.Fatalf("no room for %s", execPath)
	}
	testutil.Eventually(t, "the room to notice it is disconnected", func() bool { return room.Info().Status != bridge.StatusSynced })
}

func TestExecRoomAwayMidRun(t *testing.T) {
	for name, tc := range map[string]struct {
		resetAfter time.Duration // the room rebuilds its replica when away longer than this
		away       func(*bridgetest.Server)
	}{
		"reconnect":                      {away: func(s *bridgetest.Server) { s.Down() }},
		"reconnect after a reset":        {resetAfter: 50 * time.Millisecond, away: func(s *bridgetest.Server) { s.Down() }},
		"the server restarted meanwhile": {away: func(s *bridgetest.Server) { s.Down(); s.Restart(bridgetest.RestartOptions{}) }},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newExecEnvWith(t, oneNotebook(staleCell("c1", "print:a\nblock:g1\nprint:b\nprint:c\nblock:g2\nresult:42")),
					func(o *execution.ClientOptions) { o.WriteWait = 30 * time.Millisecond },
					func(o *bridge.ManagerOptions) { o.Room.ResetAfter = tc.resetAfter })
				j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
				awaitGate(t, e.ks, "g1", 1)
				awaitCell(t, e.srv, execPath, "c1", "showing the first output", func(c ydoc.Cell) bool { return streamText(c.Outputs) == "a\n" })

				tc.away(e.srv)
				awaitAway(t, e)
				e.ks.Release("g1")
				// The kernel goes on; its outputs reach the run while the room cannot take them.
				awaitJobCell(t, j, "c1", "holding the outputs made while the room was away", func(c execution.CellRun) bool {
					return streamText(c.Outputs) == "a\nb\nc\n"
				})
				awaitGate(t, e.ks, "g2", 1)
				e.ks.Release("g2")
				// The kernel is done; the cell is not, until the room has its end.
				stillRunning(t, j, 150*time.Millisecond, "while the room was away")

				e.srv.Up()
				v := awaitJob(t, j)
				r := cellRun(t, v, "c1")
				if v.Status != execution.JobCompleted || r.Status != execution.CellOK || !countIs(r.ExecutionCount, 1) {
					t.Fatalf("job after the room came back: %s", describeJob(v))
				}
				c := awaitCell(t, e.srv, execPath, "c1", "idle with its count", func(c ydoc.Cell) bool {
					return c.ExecutionState == "idle" && countIs(c.ExecutionCount, 1)
				})
				if got := outputTypes(c.Outputs); !slices.Equal(got, []string{"stream", "execute_result"}) || streamText(c.Outputs) != "a\nb\nc\n" {
					t.Errorf("the cell holds %s; want every output exactly once", compactJSON(c.Outputs))
				}
				if compactJSON(c.Outputs) != compactJSON(r.Outputs) {
					t.Errorf("the cell holds %s, the run reports %s", compactJSON(c.Outputs), compactJSON(r.Outputs))
				}
				if m := runMarkers(e.srv, execPath); m != nil {
					t.Errorf("run markers left: %v", m)
				}
				if k := kernelOf(t, e.ks, execPath); e.ks.Received(k) != 1 {
					t.Errorf("kernel received %d requests, want 1", e.ks.Received(k))
				}
			})
		})
	}
}

// The server holds every write without confirming it (echoes held, no resync for a minute):
// the run does not wait for the confirmations. Its outputs and its marker's beats still reach
// the server, so another sidecar never takes the live run for dead.
func TestExecUnconfirmedWritesDoNotStallTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const staleRun = 600 * time.Millisecond // beats every 200 ms
		e := newExecEnvWith(t, oneNotebook(codeCell("c1", "print:a\nblock:g\nprint:b\nblock:g2")),
			func(o *execution.ClientOptions) { o.WriteWait = 50 * time.Millisecond; o.StaleRun = staleRun },
			func(o *bridge.ManagerOptions) { o.Room.ResyncInterval = time.Minute })
		j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
		awaitGate(t, e.ks, "g", 1)
		awaitCell(t, e.srv, execPath, "c1", "showing the first output", func(c ydoc.Cell) bool { return streamText(c.Outputs) == "a\n" })

		e.srv.HoldEchoes()
		e.ks.Release("g")
		awaitCell(t, e.srv, execPath, "c1", "showing the output written without confirmation", func(c ydoc.Cell) bool { return streamText(c.Outputs) == "a\nb\n" })
		// Look at the marker for several stale periods, ten times in each: it never goes stale.
		for range 30 {
			m, _ := runMarkers(e.srv, execPath)["c1"].(map[string]any)
			beat, err := time.Parse(time.RFC3339Nano, stringOf(m["beat"]))
			if err != nil {
				t.Fatalf("marker %v has no beat", m)
			}
			if age := time.Since(beat); age >= staleRun {
				t.Fatalf("the run marker's last beat is %v old while the run is alive (stale after %v)", age, staleRun)
			}
			time.Sleep(staleRun / 10) // virtual: sampling what the server holds over time
			synctest.Wait()
		}
		notDone(t, j, "while the kernel still runs the cell")
		e.srv.ReleaseEchoes()
		e.ks.Release("g2")
		if v := awaitJob(t, j); v.Status != execution.JobCompleted {
			t.Errorf("job %s", describeJob(v))
		}
	})
}

// A job whose room is away when a cell's turn comes waits for it: the cell is not sent to the
// kernel before its reset (count cleared, [*]) is in the room; it runs once the room is back.
func TestExecCellWaitsForItsRoomBeforeItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newExecEnvWith(t, oneNotebook(codeCell("c1", "print:one"), staleCell("c2", "print:two")),
			func(o *execution.ClientOptions) { o.WriteWait = 30 * time.Millisecond }, nil)
		if _, err := e.m.Open(testutil.Context(t), execPath, ydoc.KindNotebook); err != nil {
			t.Fatal(err)
		}
		e.srv.Down()
		awaitAway(t, e)
		j := e.start(execPath, []string{"c1", "c2"}, execution.RunOptions{})
		stillRunning(t, j, 150*time.Millisecond, "while its room was away")
		if k := e.ks.KernelFor(execPath); k != "" && e.ks.Received(k) != 0 {
			t.Fatalf("the kernel received %d requests before any reset reached the room", e.ks.Received(k))
		}
		e.srv.Up()
		v := awaitJob(t, j)
		wantStatuses(t, v, execution.CellOK, execution.CellOK)
		c2 := awaitCell(t, e.srv, execPath, "c2", "run", func(c ydoc.Cell) bool { return countIs(c.ExecutionCount, 2) })
		if streamText(c2.Outputs) != "two\n" || c2.ExecutionState != "idle" {
			t.Errorf("c2 %s", describeCell(c2))
		}
	})
}

// Cancelled while it waits for its room: nothing runs.
func TestExecCancelWhileTheRoomIsAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newExecEnvWith(t, oneNotebook(staleCell("c1", "print:one")),
			func(o *execution.ClientOptions) { o.WriteWait = 30 * time.Millisecond }, nil)
		if _, err := e.m.Open(testutil.Context(t), execPath, ydoc.KindNotebook); err != nil {
			t.Fatal(err)
		}
		e.srv.Down()
		awaitAway(t, e)
		j := e.start(execPath, []string{"c1"}, execution.RunOptions{})
		stillRunning(t, j, 100*time.Millisecond, "while its room was away")
		if _, err := e.x.Cancel(testutil.Context(t), j.ID); err != nil {
			t.Fatal(err)
		}
		v := awaitJob(t, j)
		if v.Status != execution.JobCancelled {
			t.Errorf("job %s", describeJob(v))
		}
		wantStatuses(t, v, execution.CellCancelled)
		e.srv.Up()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = e.srv.Await(ctx, func() bool { c, _ := findServerCell(e.srv, execPath, "c1"); return c.ExecutionState == "running" })
		if c := serverCell(t, e.srv, execPath, "c1"); c.ExecutionState == "running" || streamText(c.Outputs) != "stale\n" {
			t.Errorf("a cancelled cell was touched once the room came back: %s", describeCell(c))
		}
	})
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
