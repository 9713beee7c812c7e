//go:build integration

package faults

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// staleReload is jupyter-server-documents reloading a room from a file older than the one it
// loaded the room from, over whatever was typed into the room in between.
//
// It follows a kill in the middle of a notebook save. jupyter-server's atomic_writing copies the
// old file to ".~name" and writes the new one in place, so the kill leaves a half-written file
// and the copy. On the next load, the contents manager stats the half-written file (its
// last_modified) and only then reads it, finds it does not parse, and puts the copy back with
// os.replace — which keeps the copy's older mtime. jupyter-server-documents records the first
// stat; its watcher's first poll (0.5 s later) sees the other mtime, takes it for a change made
// outside Jupyter and sets the room's content to the file's: everything typed into the room since
// the load is deleted, by the server, with or without the sidecar (which rejoins a restarted
// server about a second later and never saw those keystrokes). The content is the same file the
// room was loaded from; only the mtime went back, which a change from outside never does.
// docs/durability.md, "Known gaps".
type staleReload struct {
	path   string    // the document's path
	loaded time.Time // when the server loaded the room's content
	at     time.Time // when it reloaded it
	line   string    // the server's log line
}

// serverLogLayout is how jupyter-server's log lines give their time (local, milliseconds).
const serverLogLayout = "2006-01-02 15:04:05.000"

var (
	serverLogTime   = regexp.MustCompile(`^\[[A-Z] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) `)
	roomLoading     = regexp.MustCompile(`Loading content for room ID '([^']+)', found at path: '([^']+)'`)
	roomLoaded      = regexp.MustCompile(`Loaded content for room ID '([^']+)'`)
	outOfBandChange = regexp.MustCompile(`Out-of-band file change detected\. Room ID: '([^']+)', Last detected change: '([^']+)', Most recent change: '([^']+)'`)
)

// staleReloads finds in jupyter-server's log (every run of it, in order) the reloads whose file
// is older than the one the room was loaded from. Other engines log none of these lines.
func staleReloads(log string) []staleReload {
	const stamp = "2006-01-02 15:04:05.999999-07:00"
	paths := map[string]string{}     // room → path
	loaded := map[string]time.Time{} // room → its last load
	var out []staleReload
	for _, line := range strings.Split(log, "\n") {
		m := serverLogTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation(serverLogLayout, m[1], time.Local)
		if err != nil {
			continue
		}
		if m := roomLoading.FindStringSubmatch(line); m != nil {
			paths[m[1]] = m[2]
			continue
		}
		if m := roomLoaded.FindStringSubmatch(line); m != nil {
			loaded[m[1]] = at
			continue
		}
		m = outOfBandChange.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		recorded, err1 := time.Parse(stamp, m[2])
		found, err2 := time.Parse(stamp, m[3])
		from, ok := loaded[m[1]]
		if err1 != nil || err2 != nil || !ok || !found.Before(recorded) {
			continue // a file changed later than the load: a change from outside, not this
		}
		out = append(out, staleReload{path: paths[m[1]], loaded: from, at: at, line: strings.TrimSpace(line)})
	}
	return out
}

// TestStaleReloadsFromServerLog reads the lines of a real run (jupyter-server-documents 0.3.3,
// the storm of 2026-11-28 that lost 17 keystrokes this way).
func TestStaleReloadsFromServerLog(t *testing.T) {
	log := `[I 2026-11-28 17:58:35.177 ServerDocsApp] Loading content for room ID 'json:notebook:6178', found at path: 'storm.ipynb'.
[I 2026-11-28 17:58:35.222 ServerDocsApp] Loaded content for room ID 'json:notebook:6178'.
[I 2026-11-28 17:58:35.171 ServerDocsApp] Loading content for room ID 'text:file:88e1', found at path: 'storm.md'.
[I 2026-11-28 17:58:35.178 ServerDocsApp] Loaded content for room ID 'text:file:88e1'.
[W 2026-11-28 17:58:35.724 ServerDocsApp] Out-of-band file change detected. Room ID: 'json:notebook:6178', Last detected change: '2026-11-28 17:58:32.047241+00:00', Most recent change: '2026-11-28 17:58:27.468697+00:00'.
[W 2026-11-28 17:58:40.000 ServerDocsApp] Out-of-band file change detected. Room ID: 'text:file:88e1', Last detected change: '2026-11-28 17:58:32.047241+00:00', Most recent change: '2026-11-28 17:58:39.000000+00:00'.
`
	got := staleReloads(log)
	if len(got) != 1 {
		t.Fatalf("found %d stale reloads, want 1 (the notebook's; the text file's moved forward): %+v", len(got), got)
	}
	r := got[0]
	want := func(s string) time.Time {
		v, err := time.ParseInLocation(serverLogLayout, s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if r.path != "storm.ipynb" || !r.loaded.Equal(want("2026-11-28 17:58:35.222")) || !r.at.Equal(want("2026-11-28 17:58:35.724")) {
		t.Errorf("got %+v, want storm.ipynb loaded at 35.222 and reloaded at 35.724", r)
	}
}
