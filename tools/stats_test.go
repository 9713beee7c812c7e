package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/tools"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A /metrics scrape and a read of jupyter://stats/cache with many rooms open take no y-crdt
// lock: both complete, with the rooms' sizes, while another document holds the lock that every
// room's replica shares. (They used to encode every replica under it, one room after another.)
func TestStatsDoNotTakeTheCRDTLock(t *testing.T) {
	const rooms = 40
	var files []bridgetest.File
	for i := range rooms {
		var cells []ydoc.Cell
		for j := range 50 {
			cells = append(cells, code(fmt.Sprintf("c%d", j), strings.Repeat(fmt.Sprintf("x%d = %d\n", j, i), 20)))
		}
		files = append(files, nbFile(fmt.Sprintf("nb%02d.ipynb", i), notebook(cells...)))
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, files, func(o *tools.Options) { o.Metrics = reg })
	for _, f := range files {
		e.ok("get_notebook", map[string]any{"format": "json", "path": f.Path, "cell_range": map[string]any{"start": 0, "end": 1}})
	}
	type stats struct {
		RoomsOpen    int `json:"rooms_open"`
		ReplicaBytes int `json:"replica_bytes"`
		Rooms        []struct {
			Path         string `json:"path"`
			ReplicaBytes int    `json:"replica_bytes"`
		} `json:"rooms"`
	}
	readStats := func() stats {
		t.Helper()
		text, _ := e.readText("jupyter://stats/cache")
		var st stats
		if err := json.Unmarshal([]byte(text), &st); err != nil {
			t.Fatalf("jupyter://stats/cache: %v\n%s", err, text)
		}
		return st
	}
	testutil.Eventually(t, "every room's size measured", func() bool {
		st := readStats()
		for _, r := range st.Rooms {
			if r.ReplicaBytes == 0 {
				return false
			}
		}
		return st.RoomsOpen == rooms
	})

	// Another document holds the y-crdt lock (a transaction runs under it) until released.
	other, err := ydoc.NewDoc(ydoc.KindText, 4242, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	holding, release, held := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(held)
		_, _, _ = other.Transact(func(*ydoc.Txn) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	released := false
	releaseLock := func() {
		if !released {
			released = true
			close(release)
			<-held
		}
	}
	defer releaseLock()

	done := make(chan error, 1)
	var replica float64
	start := time.Now()
	go func() {
		families, err := reg.Gather()
		for _, f := range families {
			if f.GetName() == "jcm_room_replica_bytes" {
				replica = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		releaseLock()
		<-done
		t.Fatalf("a /metrics scrape of %d rooms waited for the y-crdt lock (%v)", rooms, time.Since(start).Round(time.Millisecond))
	}
	if took := time.Since(start); took > 500*time.Millisecond || replica == 0 {
		t.Errorf("scrape with y-crdt busy: %v, jcm_room_replica_bytes %.0f", took, replica)
	}
	statsDone := make(chan stats, 1)
	go func() { statsDone <- readStats() }()
	select {
	case st := <-statsDone:
		if st.RoomsOpen != rooms || st.ReplicaBytes == 0 {
			t.Errorf("jupyter://stats/cache with y-crdt busy: %d rooms, %d replica bytes", st.RoomsOpen, st.ReplicaBytes)
		}
	case <-time.After(time.Second):
		releaseLock()
		<-statsDone
		t.Fatal("jupyter://stats/cache waited for the y-crdt lock")
	}
}
