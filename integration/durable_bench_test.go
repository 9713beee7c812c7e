//go:build integration

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/journalstore"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/journal"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// BenchmarkSaveGuardCost: what the save guard costs jupyter-server. 50 notebooks (14 kB each)
// are busy — one line appended to a cell of each every 300 ms, as a cell printing progress —
// for JCM_SAVE_BENCH_DURATION (30s) with the guard off (--save-interval 0: the server never
// saves, as every change restarts its wait) and on (5 s); reported: the server process's CPU
// (user + system, % of one core), the saves it wrote, and the requests the sidecar sent.
func BenchmarkSaveGuardCost(b *testing.B) {
	const rooms = 50
	dur := envDuration(b, "JCM_SAVE_BENCH_DURATION", 30*time.Second)
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
					_, _ = r.Apply(bctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
						c, err := tx.Cell(0)
						if err != nil {
							return err
						}
						return tx.SetSource(0, c.Source+fmt.Sprintf("\nprogress %d", i))
					}))
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

// edgeSplit is one probe edit's latency and the part of it before the edit left for the server.
type edgeSplit struct{ total, before time.Duration }

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

// BenchmarkSaveStall is the probe of issue 26's point 1: what the sidecar's saves cost everyone
// else on the server. One jupyter-server (a fresh one per setting), one sidecar (with its write-ahead log on disk, as cmd
// wires it), a 20-cell notebook edited every 50 ms beside a 2,000-cell notebook (~1.4 MB) that 3
// agents edit without pause, for JCM_SAVE_PROBE_DURATION (60s) per setting: first the small room
// alone (saves at the default, the big notebook open and idle: issue 29's interference probe
// compares the default with it), then saves off
// (--save-interval 0), the default (60s: saves only when the server's own autosave did not come,
// or once a minute for a document that never pauses, spaced by five times a save's duration),
// and 5s (the file at most 5 s behind), then off again (the machine's drift), and last the
// default with the big notebook's three writers as independent yjs peers instead of the
// sidecar's agents (the server's share of the interference), and the default with the room's
// pacing off ("unpaced": each agent's edit leaves at once, bridge NoPacing). JCM_SAVE_PROBE_SETTINGS picks a
// subset by label; JCM_SAVE_PROBE_MUTEX_PROFILES names a directory for each setting's mutex
// and CPU profiles of this process (the sidecar runs in it). Reported: the small room's edit latency (p50, p99, max:
// an edit returns once the server confirmed it), the busy room's edits, the save requests and the
// saves the server wrote.
func BenchmarkSaveStall(b *testing.B) {
	dur := envDuration(b, "JCM_SAVE_PROBE_DURATION", 60*time.Second)
	ctx := ctxT(b, 60*time.Minute)
	small, big := generatedNotebook(20, 600), generatedNotebook(2000, 600)
	b.Logf("notebooks: small %d kB, big %d kB", len(small)/1000, len(big)/1000)
	type result struct {
		label          string
		p50, p99, maxL time.Duration
		srvCPU, ownCPU float64 // % of one core: jupyter-server; this process (the sidecar, the agents, the probe)
		edits, busy    int
		saves          int
		stats          bridge.SaveStats
	}
	var results []result
	only := os.Getenv("JCM_SAVE_PROBE_SETTINGS") // a comma-separated subset of the labels below
	// Each peer's pace: three agents through the sidecar make about 350 edits/s here (they wait
	// for each edit's confirmation); peers that do not wait would flood the server instead.
	peerEvery := envDuration(b, "JCM_SAVE_PROBE_PEER_EVERY", 9*time.Millisecond)
	mutexDir := os.Getenv("JCM_SAVE_PROBE_MUTEX_PROFILES")
	for _, setting := range []struct {
		label    string
		interval time.Duration
		alone    bool // nobody edits the big notebook (open, idle): the small room alone
		peers    bool // the big notebook's three writers are independent yjs peers, not the sidecar's agents
		unpaced  bool // the room sends each edit at once, even behind its unconfirmed ones (bridge NoPacing)
	}{{"alone", 60 * time.Second, true, false, false}, {"off", 0, false, false, false}, {"default-60s", 60 * time.Second, false, false, false},
		{"5s", 5 * time.Second, false, false, false}, {"off-again", 0, false, false, false}, {"peers", 60 * time.Second, false, true, false},
		{"unpaced", 60 * time.Second, false, false, true}} {
		if only != "" && !slices.Contains(strings.Split(only, ","), setting.label) {
			continue
		}
		// A fresh server per setting: nothing of the one before (rooms it still holds, its
		// memory) weighs on the next.
		srv, err := StartJupyter(ctx, ServerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		smallName, bigName := "probe-small.ipynb", "probe-big.ipynb"
		if err := srv.WriteFile(smallName, small); err != nil {
			b.Fatal(err)
		}
		if err := srv.WriteFile(bigName, big); err != nil {
			b.Fatal(err)
		}
		store, err := journal.Open(journal.Options{Dir: b.TempDir(), Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		sc := newSidecar(b, srv, func(o *bridge.ManagerOptions) {
			o.Room.SaveInterval = setting.interval
			o.Room.NoPacing = setting.unpaced
			o.Journal = journalstore.New(store)
		})
		smallRoom, err := sc.manager.Open(ctx, smallName, ydoc.KindNotebook)
		if err != nil {
			b.Fatal(err)
		}
		bigRoom, err := sc.manager.Open(ctx, bigName, ydoc.KindNotebook)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(3 * time.Second) // joins settled, the server's first saves done
		savesBefore := strings.Count(srv.Log(), "Saving file:")
		before := sc.manager.SaveStats()
		pctx, stop := context.WithTimeout(ctx, dur)
		started := time.Now()
		srvCPU, ownCPU := processCPU(b, srv.Pid()), processCPU(b, os.Getpid())
		var wg sync.WaitGroup
		var busy atomic.Int64
		var cpuProfile *os.File
		if mutexDir != "" {
			runtime.SetMutexProfileFraction(1)
			f, err := os.Create(filepath.Join(mutexDir, "cpu-"+setting.label+".pprof"))
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			cpuProfile = f
		}
		for a := range 3 * btoi(setting.peers) { // three independent peers on the big notebook, without pause
			p, err := StartPeer()
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if err := p.Connect(ctx, srv, bigName, "notebook"); err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(a), 26))
				tick := time.NewTicker(peerEvery)
				defer tick.Stop()
				for i := 0; pctx.Err() == nil; i++ {
					select { // paced: the agents' pace, not as fast as node can send
					case <-tick.C:
					case <-pctx.Done():
						return
					}
					err := p.Transact(pctx, `const s = cells.get(args.cell).get('source'); s.insert(s.length, args.line)`,
						map[string]any{"cell": rng.IntN(2000), "line": fmt.Sprintf("# peer %d edit %d\n", a, i)})
					if err == nil {
						busy.Add(1)
					}
				}
			}()
		}
		for a := range 3 * btoi(!setting.alone && !setting.peers) { // three agents on the big notebook, without pause
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(a), 26))
				for i := 0; pctx.Err() == nil; i++ {
					cell := rng.IntN(2000)
					_, err := bigRoom.Apply(pctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
						c, err := tx.Cell(cell)
						if err != nil {
							return err
						}
						return tx.SetSource(cell, c.Source+fmt.Sprintf("# agent %d edit %d\n", a, i))
					}))
					if err == nil {
						busy.Add(1)
					}
				}
			}()
		}
		var lat []time.Duration
		var ours []edgeSplit                 // each edit's time until it left for the server (in this process) and after
		for i := 0; pctx.Err() == nil; i++ { // the small notebook, every 50 ms
			start := time.Now()
			var left atomic.Int64 // when the room handed the edit to the server's socket (unix ns)
			pend, err := smallRoom.Propose(pctx, bridge.Proposal{Edit: ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
				c, err := tx.Cell(i % 20)
				if err != nil {
					return err
				}
				return tx.SetSource(i%20, c.Source+"x")
			}), Applied: func() { left.Store(time.Now().UnixNano()) }})
			if err == nil {
				_, err = pend.Wait(pctx)
			}
			if err == nil {
				took := time.Since(start)
				lat = append(lat, took)
				if l := left.Load(); l != 0 {
					before := time.Unix(0, l).Sub(start)
					ours = append(ours, edgeSplit{total: took, before: before})
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(50*time.Millisecond - min(time.Since(start), 50*time.Millisecond)):
			}
		}
		wg.Wait()
		stop()
		wall := time.Since(started)
		srvCPU, ownCPU = processCPU(b, srv.Pid())-srvCPU, processCPU(b, os.Getpid())-ownCPU
		if cpuProfile != nil {
			pprof.StopCPUProfile()
			_ = cpuProfile.Close()
		}
		if mutexDir != "" {
			f, err := os.Create(filepath.Join(mutexDir, "mutex-"+setting.label+".pprof"))
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("mutex").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
			runtime.SetMutexProfileFraction(0)
		}
		st := sc.manager.SaveStats()
		st.Asked -= before.Asked
		st.Marked -= before.Marked
		st.Timed -= before.Timed
		st.TookSeconds -= before.TookSeconds
		slices.Sort(lat)
		pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
		if len(ours) > 0 { // where the slowest edits spent their time: in this process, or after it
			slices.SortFunc(ours, func(x, y edgeSplit) int { return int(y.total - x.total) })
			slow := ours[:max(1, len(ours)/100)]
			var total, before time.Duration
			for _, e := range slow {
				total += e.total
				before += e.before
			}
			b.Logf("saves %-12s small room's slowest 1%% (%d edits): mean %.1f ms, of which %.1f ms before the edit left for the server (room queue, y-crdt lock, encoding) and %.1f ms after (the socket, the server, and taking its confirmation here)",
				setting.label, len(slow), ms(total/time.Duration(len(slow))), ms(before/time.Duration(len(slow))), ms((total-before)/time.Duration(len(slow))))
		}
		r := result{label: setting.label, p50: pct(0.5), p99: pct(0.99), maxL: pct(1), edits: len(lat), busy: int(busy.Load()),
			srvCPU: 100 * srvCPU.Seconds() / wall.Seconds(), ownCPU: 100 * ownCPU.Seconds() / wall.Seconds(),
			saves: strings.Count(srv.Log(), "Saving file:") - savesBefore, stats: st}
		results = append(results, r)
		b.ReportMetric(float64(r.p50.Microseconds())/1000, "small-p50-ms-"+r.label)
		b.ReportMetric(float64(r.p99.Microseconds())/1000, "small-p99-ms-"+r.label)
		b.ReportMetric(float64(r.busy), "busy-edits-"+r.label)
		sc.stop()
		_ = store.Close()
		srv.Stop()
	}
	for _, r := range results {
		meanTook := 0.0
		if r.stats.Timed > 0 {
			meanTook = 1000 * r.stats.TookSeconds / float64(r.stats.Timed)
		}
		b.Logf("saves %-12s small room: %d edits, p50 %.1f ms, p99 %.1f ms, max %.1f ms | busy room: %d edits | requests %d (mean %.0f ms), saves reported %d, server saves %d | CPU: jupyter-server %.0f%%, sidecar process %.0f%% of a core",
			r.label, r.edits, ms(r.p50), ms(r.p99), ms(r.maxL), r.busy, r.stats.Asked, meanTook, r.stats.Marked, r.saves, r.srvCPU, r.ownCPU)
	}
	byLabel := map[string]result{}
	for _, r := range results {
		byLabel[r.label] = r
	}
	alone, hasAlone := byLabel["alone"]
	off, hasOff := byLabel["off"]
	again, hasAgain := byLabel["off-again"]
	if hasOff && hasAgain { // against the two runs with saves off (the machine's drift shows between them)
		offP50, offP99 := (ms(off.p50)+ms(again.p50))/2, (ms(off.p99)+ms(again.p99))/2
		for _, label := range []string{"default-60s", "5s"} {
			if r, ok := byLabel[label]; ok {
				b.Logf("%s vs off (mean of both): p50 %.2fx, p99 %.2fx (acceptance for saves on: p50 within 1.5x, p99 within 3x)", r.label, ms(r.p50)/offP50, ms(r.p99)/offP99)
			}
		}
	}
	if !hasAlone {
		return
	}
	// Issue 29's interference probe: the small room beside the busy one, saves on (the default),
	// against the small room alone (the same settings, the big notebook open and idle).
	if def, ok := byLabel["default-60s"]; ok {
		b.Logf("with the busy neighbour vs alone (saves at the default): p50 %.2fx, p99 %.2fx (acceptance: p50 within 1.5x, p99 within 3x)", ms(def.p50)/ms(alone.p50), ms(def.p99)/ms(alone.p99))
	}
	// The same neighbour with pacing off: each agent's edit leaves at once (bridge NoPacing).
	if r, ok := byLabel["unpaced"]; ok {
		b.Logf("with the busy neighbour unpaced vs alone: p50 %.2fx, p99 %.2fx (busy edits %d)", ms(r.p50)/ms(alone.p50), ms(r.p99)/ms(alone.p99), r.busy)
	}
	// The same neighbour load by independent peers, beside the sidecar rather than through it:
	// what the server's side of the neighbour costs the small room.
	if peers, ok := byLabel["peers"]; ok {
		b.Logf("with the neighbour's writers as independent peers vs alone: p50 %.2fx, p99 %.2fx (busy edits %d)",
			ms(peers.p50)/ms(alone.p50), ms(peers.p99)/ms(alone.p99), peers.busy)
	}
}

// envDuration is the duration the environment variable name gives, or def when it is unset.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
