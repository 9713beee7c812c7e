//go:build integration

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/integration"
)

// Humans at the keyboard, for the crash tests (the storm, the fault injection, the pod crash):
// independent yjs peers (integration/node/peer.mjs) that type unique tokens into a notebook's
// original cells or into a text file, and what they typed checked against what is there at the
// end. A token is inserted at a token boundary in one transaction, so it is whole or absent;
// counting tokens tells lost from doubled.
//
// When jupyter-server restarts a human comes back one of two ways:
//   - as a reloaded tab (keepDoc false): a fresh document from the server. What it typed on the
//     dead connection before it noticed never left it; what the sidecar held is the sidecar's to
//     bring back.
//   - as a tab that stays open (keepDoc true), which is what JupyterLab does: its provider
//     (y-websocket) reconnects by itself with the same Y.Doc and the same session id, and the sync
//     sends the server everything the old copy holds that the server lacks. It goes on typing
//     while the server is down; all of it must arrive once, except what the server's own sync
//     deleted from the tab's copy (checkKeys says when) — and after a restart that deleted the
//     update store the tab reloads instead (jupyter-collaboration #594/#621: a room rebuilt from
//     the file under the ids of its first load takes such a copy as new and doubles it, or as
//     known and drops it; reloadAfterNextKill). A server that refuses the old session (1003)
//     makes the tab ask for a reload: it then connects afresh.

// humanTokenRE matches a human's keystroke: «h<human>k<n>».
var humanTokenRE = regexp.MustCompile(`«h\d+k\d+»`)

// humanOfToken finds the human's number in a keystroke token.
var humanOfToken = regexp.MustCompile(`^«h(\d+)k`)

type keystroke struct {
	tok   string
	human int
	at    time.Time // when it was typed (the transaction was sent to the peer)
	conn  int       // the human's connection it was typed on (0: the first)
}

// connRec is one (re)connection of a human: when its sync finished, and whether it carried the
// document the human already held (a tab that stayed open) or started from a fresh one.
type connRec struct {
	at      time.Time
	carried bool
	// synced holds the tokens the tab's own copy held right after a carried reconnection's sync
	// (nil: not looked at): what the tab typed while the server was down and no longer holds
	// then, the server's sync had deleted (see checkKeys).
	synced map[string]bool
}

type humanRec struct {
	name    string
	path    string // the document it types into
	keepDoc bool
	conns   []connRec
}

// keyLedger records every keystroke and (re)connection of the humans of a test.
type keyLedger struct {
	mu     sync.Mutex
	humans []*humanRec
	keys   []keystroke
}

// addHuman registers a human typing into path (connected once, now) and returns its number.
func (l *keyLedger) addHuman(name, path string, keepDoc bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.humans = append(l.humans, &humanRec{name: name, path: path, keepDoc: keepDoc, conns: []connRec{{at: time.Now()}}})
	return len(l.humans) - 1
}

func (l *keyLedger) connected(j int, c connRec) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.humans[j]
	c.at = time.Now()
	h.conns = append(h.conns, c)
	return len(h.conns) - 1
}

func (l *keyLedger) typed(k keystroke) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, k)
}

// typist is one human typing a keystroke every `every` into a document until its loop ends.
type typist struct {
	j       int
	peer    *integration.Peer
	srv     *integration.JupyterServer
	path    string
	kind    string   // "notebook" or "file"
	cells   []string // notebook: the cells it types into
	keepDoc bool
	every   time.Duration
	paused  func(time.Time) bool // true while the human pauses (nil: never)
	// reloadNext: a tab that stays open reloads after the next loss of its connection instead,
	// as its person must after a restart whose rebuilt room its copy cannot merge into (see
	// reloadAfterNextKill).
	reloadNext atomic.Bool
	led        *keyLedger
	rng        *rand.Rand
	away       chan bool // true: close the document (the person leaves); false: open it again
}

// setAway makes the human leave the document (closing it) or come back (opening it afresh). It
// returns once the loop took the request (nothing when the loop has ended).
func (ty *typist) setAway(loops context.Context, away bool) {
	select {
	case ty.away <- away:
	case <-loops.Done():
	}
}

// startTypist connects a new human to a document and registers it.
func startTypist(t *testing.T, ctx context.Context, led *keyLedger, srv *integration.JupyterServer, path, kind string, cells []string, keepDoc bool, every time.Duration) *typist {
	t.Helper()
	if keepDoc && integration.DefaultEngine().Documents() {
		// jupyter-server-documents' JupyterLab provider keeps its copy through a reconnection only
		// while the server knows every client that copy holds: when the server's state vector
		// (its sync step 1, after its step 2) lacks one, it clears its document and takes the
		// server's (the handshake handler of @jupyter-ai-contrib/server-documents 0.3.3's
		// bundle, around "Received SyncStep1 with no preceding SyncStep2"). After a restart the
		// server rebuilds every room with fresh ids, so such a tab always starts over from the
		// server's copy: it is a reloading tab, and a peer that merged its old copy would test
		// a client this engine does not have (it doubles the whole document).
		keepDoc = false
	}
	p, err := integration.StartPeer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.Connect(ctx, srv, path, kind); err != nil {
		t.Fatalf("human connecting to %s: %v", path, err)
	}
	name := fmt.Sprintf("%s typist on %s", map[bool]string{true: "tab-like", false: "reloading"}[keepDoc], path)
	j := led.addHuman(name, path, keepDoc)
	return &typist{j: j, peer: p, srv: srv, path: path, kind: kind, cells: cells, keepDoc: keepDoc, every: every, led: led,
		rng: rand.New(rand.NewPCG(uint64(j)+100, 99)), away: make(chan bool)}
}

const typeCode = `
let t = source
if (args.cell) {
  const cell = cells.toArray().find(c => c.get('id') === args.cell)
  if (!cell) return 'no cell'
  t = cell.get('source')
}
const s = t.toString()
const at = [s.length]
for (let i = s.indexOf('»'); i >= 0; i = s.indexOf('»', i + 1)) at.push(i + 1)
t.insert(at[Math.floor(args.r * at.length)], args.tok)
return 'ok'`

// run types until loops ends; ctx bounds the calls.
func (ty *typist) run(loops, ctx context.Context) {
	conn := 0
	out := false                    // the human left the document (setAway)
	down := false                   // the connection closed and no new one is synced yet
	back := make(chan connRec, 1)   // a tab-like human's reconnection, from its goroutine
	var reconnecting sync.WaitGroup // that goroutine
	defer reconnecting.Wait()
	for k := 0; loops.Err() == nil; {
		select {
		case <-loops.Done():
			return
		case c := <-back:
			down = false
			conn = ty.led.connected(ty.j, c)
			continue
		case leave := <-ty.away:
			switch {
			case leave && !out && !down:
				out = true
				_ = ty.peer.Call(ctx, "disconnect", nil, nil)
			case !leave && out:
				if !ty.connectFresh(loops, ctx) {
					return
				}
				out = false
				conn = ty.led.connected(ty.j, connRec{})
			}
			continue
		case ev := <-ty.peer.Events():
			if ev.Event != "close" || down {
				continue
			}
			down = true
			if ty.keepDoc && !ty.reloadNext.Swap(false) {
				// The tab stays open and reconnects by itself while the person goes on typing.
				reconnecting.Add(1)
				go func() { defer reconnecting.Done(); ty.reconnect(loops, ctx, back) }()
				continue
			}
			// A reload: nothing is typed until the page is back.
			if !ty.connectFresh(loops, ctx) {
				return
			}
			down = false
			conn = ty.led.connected(ty.j, connRec{})
			continue
		case <-time.After(ty.every):
		}
		if out || (ty.paused != nil && ty.paused(time.Now())) {
			continue
		}
		k++
		tok := fmt.Sprintf("«h%dk%05d»", ty.j, k)
		args := map[string]any{"tok": tok, "r": ty.rng.Float64()}
		if ty.kind == "notebook" {
			args["cell"] = ty.cells[ty.rng.IntN(len(ty.cells))]
		}
		var res struct {
			Result string `json:"result"`
		}
		at := time.Now()
		if err := ty.peer.Call(ctx, "transact", map[string]any{"code": typeCode, "args": args}, &res); err == nil && res.Result == "ok" {
			ty.led.typed(keystroke{tok: tok, human: ty.j, at: at, conn: conn})
		}
	}
}

// reloadAfterNextKill makes a tab that stays open reload after the next kill, as its person must
// when jupyter-collaboration rebuilt the room from a file saved since the room was first loaded
// (its update store gone): the rebuild reuses the first load's ids for other content, and the
// tab's old copy can never converge with it (docs/durability.md, "What survives a crash"; the
// room, the file and every other peer hold everything once, the sidecar sees to that, but what
// the tab shows and types into its own view is its own until it reloads). The browser test
// TestTabTypingThroughServerCrash keeps a real tab open through such a restart.
func (ty *typist) reloadAfterNextKill() {
	if ty.keepDoc {
		ty.reloadNext.Store(true)
	}
}

// reconnect tries the old document until the server takes it (or refuses the old session: then
// the tab is reloaded).
func (ty *typist) reconnect(loops, ctx context.Context, back chan<- connRec) {
	for loops.Err() == nil {
		err := ty.peer.Reconnect(ctx, 30*time.Second)
		if err == nil {
			// The closes of the attempts that failed came before this answer: drop them, or
			// the loop would take one for a new loss.
			for len(ty.peer.Events()) > 0 {
				<-ty.peer.Events()
			}
			c := connRec{carried: true}
			if snap, err := ty.peer.Snapshot(ctx); err == nil { // the tab's copy right after the sync
				c.synced = map[string]bool{}
				texts := []string{snap.Text}
				for _, cell := range snap.Cells {
					texts = append(texts, cell.Source)
				}
				for tok := range tokenCounts(humanTokenRE, texts...) {
					c.synced[tok] = true
				}
			}
			back <- c
			return
		}
		if strings.Contains(err.Error(), "closed 1003") {
			if ty.connectFresh(loops, ctx) {
				back <- connRec{carried: false}
			}
			return
		}
		select {
		case <-loops.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// connectFresh loads the document afresh (a reload) once the server answers again.
func (ty *typist) connectFresh(loops, ctx context.Context) bool {
	for loops.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := ty.peer.Connect(cctx, ty.srv, ty.path, ty.kind)
		cancel()
		if err == nil {
			for len(ty.peer.Events()) > 0 { // closes of the attempts that failed
				<-ty.peer.Events()
			}
			return true
		}
		select {
		case <-loops.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false
}

// keyKill is one kill of jupyter-server (or of the pod) and the keystrokes the sidecar held right
// before it.
type keyKill struct {
	at   time.Time
	held map[string]bool
}

// keyStats are the numbers checkKeys reports.
type keyStats struct {
	typed      int // keystrokes typed
	typed1s    int // typed ≥ 1 s before a kill on a live connection
	held1s     int // of those, held by the sidecar at the kill
	notReached int // typed ≥ 1 s before a kill, not held by the sidecar, and gone
	dead       int // typed into a reloading tab on a connection a kill had ended (never left it)
	carried    int // typed by a tab-like human while the server was down (must arrive)
	dropped    int // of those, gone from the tab's own copy by the end of its reconnection's sync
	kept       int // typed by a tab-like human on a live connection (its copy holds them)
	lastPhase  int // typed on the last connection ≥ 1 s before the end
	erased     int // required but typed into a room the server then reloaded from an older file, and gone
	lost       int // required and gone
	doubled    int // there more than once
}

func (s keyStats) String() string {
	return fmt.Sprintf("%d keystrokes typed; %d typed ≥ 1 s before a kill on a live connection, %d of them held by the sidecar at the kill (%d not held and gone); %d typed into a reloading tab after a kill cut it (never sent); %d typed by tab-like humans while the server was down (%d of them deleted by the server's sync of the reconnection, not required) and %d while connected; %d typed after the last reconnection; %d erased by the server's reload of an older file; LOST %d, DOUBLED %d",
		s.typed, s.typed1s, s.held1s, s.notReached, s.dead, s.carried, s.dropped, s.kept, s.lastPhase, s.erased, s.lost, s.doubled)
}

// checkKeys compares what the humans typed with counts (token → occurrences in the final
// documents) and reports every keystroke lost or doubled:
//   - none is there twice;
//   - every keystroke the sidecar held right before a kill is there;
//   - a tab-like human's keystrokes are all there (its copy holds them), unless a reload
//     dropped its copy before they were sent;
//   - keystrokes typed on a human's last connection, a second before end, are there.
//
// Keystrokes typed ≥ 1 s before a kill that the sidecar did not hold (it was away, rejoining
// after an earlier fault) are counted, not required: they reached only a server that died.
// Keystrokes a tab-like human typed while the server was down that its own copy no longer held
// right after its reconnection's sync are counted, not required: the server's answer deleted
// them — on jupyter-collaboration, a reload of the file over the update store re-creates the
// cells it moves (jupyter_ydoc's YNotebook._set deletes and inserts them), and what the tab
// typed into the deleted originals is collected by the server before anyone else sees it, with
// the sidecar or without it (docs/durability.md, "What survives a crash").
func checkKeys(t *testing.T, led *keyLedger, kills []keyKill, counts map[string]int, end time.Time, serverLog string) keyStats {
	t.Helper()
	led.mu.Lock()
	defer led.mu.Unlock()
	var st keyStats
	st.typed = len(led.keys)
	for tok, n := range counts {
		if n > 1 && humanTokenRE.MatchString(tok) {
			st.doubled++
			if st.doubled <= 20 {
				t.Errorf("DOUBLED: keystroke %s is there %d times", tok, n)
			}
		}
	}
	required := map[string]string{} // token → why it must be there
	droppedBy := map[string]int{}   // human → keystrokes typed while down that its sync deleted
	for k, kill := range kills {
		for tok := range kill.held {
			if humanTokenRE.MatchString(tok) {
				required[tok] = fmt.Sprintf("held by the sidecar right before kill %d (%s)", k+1, kill.at.Format("15:04:05.000"))
			}
		}
	}
	// cutAt: the first kill after connection conn of human j began, if it came before at.
	cutAt := func(j, conn int, at time.Time) (time.Time, bool) {
		since := led.humans[j].conns[conn].at
		for _, k := range kills {
			if k.at.After(since) && !k.at.After(at) {
				return k.at, true
			}
		}
		return time.Time{}, false
	}
	// carriedAfter: every connection of human j after conn carried the document.
	carriedAfter := func(j, conn int) bool {
		conns := led.humans[j].conns
		if conn+1 >= len(conns) {
			return false
		}
		for _, c := range conns[conn+1:] {
			if !c.carried {
				return false
			}
		}
		return true
	}
	for _, key := range led.keys {
		h := led.humans[key.human]
		if kill, cut := cutAt(key.human, key.conn, key.at); cut {
			if h.keepDoc && carriedAfter(key.human, key.conn) {
				st.carried++
				if next := h.conns[key.conn+1]; next.synced != nil && !next.synced[key.tok] {
					st.dropped++
					droppedBy[h.name]++
					continue
				}
				if _, ok := required[key.tok]; !ok {
					required[key.tok] = fmt.Sprintf("typed by the %s at %s while the server was down (killed at %s); the tab kept it and reconnected with it",
						h.name, key.at.Format("15:04:05.000"), kill.Format("15:04:05.000"))
				}
			} else {
				st.dead++
			}
			continue
		}
		if h.keepDoc && carriedAfter(key.human, key.conn) {
			st.kept++
			if _, ok := required[key.tok]; !ok {
				required[key.tok] = fmt.Sprintf("typed by the %s at %s; the tab kept it through every reconnection", h.name, key.at.Format("15:04:05.000"))
			}
		}
		for k, kill := range kills {
			prev := time.Time{}
			if k > 0 {
				prev = kills[k-1].at
			}
			if key.at.After(prev) && key.at.Before(kill.at.Add(-time.Second)) {
				st.typed1s++
				if kill.held[key.tok] {
					st.held1s++
				} else if counts[key.tok] == 0 {
					st.notReached++
				}
			}
		}
		last := len(h.conns) - 1
		if key.conn == last && key.at.After(h.conns[last].at) && key.at.Before(end.Add(-time.Second)) {
			st.lastPhase++
			if _, ok := required[key.tok]; !ok {
				required[key.tok] = fmt.Sprintf("typed by the %s at %s on its last connection (from %s)", h.name, key.at.Format("15:04:05.000"), h.conns[last].at.Format("15:04:05.000"))
			}
		}
	}
	for name, n := range droppedBy {
		t.Logf("%s: %d keystrokes typed while the server was down were gone from its copy right after its reconnection's sync", name, n)
	}
	// Keystrokes typed into a room jupyter-server-documents then reloaded from an older file
	// (staleReloads) and gone: counted, not required.
	reloads := staleReloads(serverLog)
	typedAt := map[string]keystroke{}
	for _, key := range led.keys {
		typedAt[key.tok] = key
	}
	erasedBy := func(tok string) (staleReload, bool) {
		key, ok := typedAt[tok]
		if !ok {
			return staleReload{}, false
		}
		for _, r := range reloads {
			if r.path == led.humans[key.human].path && !key.at.Before(r.loaded) && !key.at.After(r.at) {
				return r, true
			}
		}
		return staleReload{}, false
	}
	var lost []string
	for tok, why := range required {
		if counts[tok] > 0 {
			continue
		}
		if r, ok := erasedBy(tok); ok {
			st.erased++
			t.Logf("erased by the server, not required: keystroke %s (%s): jupyter-server-documents loaded %s at %s and reloaded it over the room at %s (%s)",
				tok, why, r.path, r.loaded.Format("15:04:05.000"), r.at.Format("15:04:05.000"), r.line)
			continue
		}
		lost = append(lost, tok+": "+why)
	}
	sort.Strings(lost)
	st.lost = len(lost)
	if len(lost) > 20 { // the list below is cut: say whose they are
		per := make([]int, len(led.humans))
		for _, l := range lost {
			if m := humanOfToken.FindStringSubmatch(l); len(m) > 1 {
				if j, err := strconv.Atoi(m[1]); err == nil && j < len(per) {
					per[j]++
				}
			}
		}
		var parts []string
		for j, n := range per {
			parts = append(parts, fmt.Sprintf("%s: %d", led.humans[j].name, n))
		}
		t.Errorf("LOST per human: %s", strings.Join(parts, ", "))
	}
	for i, l := range lost {
		if i == 20 {
			t.Errorf("LOST: … and %d more keystrokes", len(lost)-20)
			break
		}
		t.Errorf("LOST: keystroke %s", l)
	}
	return st
}

// tokenCounts counts the tokens re matches in texts.
func tokenCounts(re *regexp.Regexp, texts ...string) map[string]int {
	counts := map[string]int{}
	for _, s := range texts {
		for _, tok := range re.FindAllString(s, -1) {
			counts[tok]++
		}
	}
	return counts
}

// readDocument reads a text document's content from the sidecar's replica (get_document).
func readDocument(ctx context.Context, a *agent, path string) (string, error) {
	res := a.call(ctx, "get_document", map[string]any{"path": path, "max_content_length": 5000000, "max_tokens": 2000000})
	if res.out != outOK {
		return "", fmt.Errorf("get_document %s: %s %s", path, res.out, res.err)
	}
	if res.data["truncated"] != nil {
		return "", fmt.Errorf("get_document %s was cut: %v", path, res.data["truncated"])
	}
	s, _ := res.data["content"].(string)
	return s, nil
}

// heldBy reads the sidecar's replicas of the documents (notebooks and text files) and returns the
// tokens re finds in them.
func heldBy(ctx context.Context, a *agent, re *regexp.Regexp, notebooks, texts []string) (map[string]bool, error) {
	held := map[string]bool{}
	for _, p := range notebooks {
		nb, err := readSidecarNotebook(ctx, a, p)
		if err != nil {
			return nil, err
		}
		for _, tok := range re.FindAllString(nb.text, -1) {
			held[tok] = true
		}
	}
	for _, p := range texts {
		s, err := readDocument(ctx, a, p)
		if err != nil {
			return nil, err
		}
		for _, tok := range re.FindAllString(s, -1) {
			held[tok] = true
		}
	}
	return held, nil
}

// rescueRec is one crash rescue as the sidecar logged it.
type rescueRec struct {
	path     string
	restored bool
	lossless bool
	summary  string
}

// rescueLog reads the rescue outcomes the sidecar logged after offset (a byte offset in its log)
// and returns them with the offset to read from next. A rescue line is the one the room writes
// when it decided what to do with a lost replica: JSON with a boolean "restored" and the
// document's "path".
func (p *sidecarProc) rescueLog(offset int64) ([]rescueRec, int64) {
	lines, next := p.logLinesFrom(offset)
	var out []rescueRec
	for _, m := range lines {
		restored, ok := m["restored"].(bool)
		path, _ := m["path"].(string)
		if !ok || path == "" {
			continue
		}
		msg, _ := m["message"].(string)
		nr, _ := m["not_restored"].([]any)
		out = append(out, rescueRec{path: path, restored: restored, lossless: len(nr) == 0, summary: msg})
	}
	return out, next
}

// countRescues sums rescue outcomes for a report line.
func countRescues(recs []rescueRec) (restored, gaveUp, gaveUpLossless int) {
	for _, r := range recs {
		switch {
		case r.restored:
			restored++
		case r.lossless:
			gaveUpLossless++
		default:
			gaveUp++
		}
	}
	return
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
