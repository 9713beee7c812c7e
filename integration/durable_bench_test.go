//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// BenchmarkSaveGuardCost: what the save guard costs jupyter-server. 50 notebooks (14 kB each)
// are busy — one line appended to a cell of each every 300 ms, as a cell printing progress —
// for JCM_SAVE_BENCH_DURATION (30s) with the guard off (--save-interval 0: the server never
// saves, as every change restarts its wait) and on (5 s); reported: the server process's CPU
// (user + system, % of one core), the saves it wrote, and the requests the sidecar sent.
func BenchmarkSaveGuardCost(b *testing.B) {
	const rooms = 50
	dur := 30 * time.Second
	if v := os.Getenv("JCM_SAVE_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		dur = d
	}
	ctx := ctxT(b, 10*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	raw := fixture(b, "jupyterlab--example.ipynb")
	for _, interval := range []time.Duration{0, 5 * time.Second} {
		var names []string
		for i := 0; i < rooms; i++ {
			name := fmt.Sprintf("busy-%s-%02d.ipynb", interval, i)
			if err := srv.WriteFile(name, raw); err != nil {
				b.Fatal(err)
			}
			names = append(names, name)
		}
		sc := newSidecar(b, srv, func(o *bridge.ManagerOptions) { o.Room.SaveInterval = interval })
		var open []*bridge.Room
		for _, n := range names {
			r, err := sc.manager.Open(ctx, n, ydoc.KindNotebook)
			if err != nil {
				b.Fatal(err)
			}
			open = append(open, r)
		}
		time.Sleep(3 * time.Second) // joins settled and saved
		savesBefore := strings.Count(srv.Log(), "Saving file:")
		cpuBefore := processCPU(b, srv.Pid())
		start := time.Now()
		bctx, stop := context.WithTimeout(ctx, dur)
		var wg sync.WaitGroup
		for _, r := range open {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; bctx.Err() == nil; i++ {
					_, _ = r.Edit(bctx, func(tx *ydoc.Txn, _ bool) error {
						c, err := tx.Cell(0)
						if err != nil {
							return err
						}
						return tx.SetSource(0, c.Source+fmt.Sprintf("\nprogress %d", i))
					})
					select {
					case <-bctx.Done():
					case <-time.After(300 * time.Millisecond):
					}
				}
			}()
		}
		wg.Wait()
		stop()
		wall := time.Since(start)
		cpu := processCPU(b, srv.Pid()) - cpuBefore
		saves := strings.Count(srv.Log(), "Saving file:") - savesBefore
		st := sc.manager.SaveStats()
		label := "off"
		if interval > 0 {
			label = "on"
		}
		b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "server-cpu-%-guard-"+label)
		b.ReportMetric(float64(saves)/wall.Seconds(), "saves/s-guard-"+label)
		b.Logf("guard %s (interval %s): %d rooms busy for %v: jupyter-server CPU %.1f%% of a core; %d saves written (%.2f/s); requests %+v",
			label, interval, rooms, wall.Round(time.Second), 100*cpu.Seconds()/wall.Seconds(), saves, float64(saves)/wall.Seconds(), st)
		sc.stop()
	}
}

// processCPU is a process's user + system CPU time so far (Linux /proc).
func processCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
