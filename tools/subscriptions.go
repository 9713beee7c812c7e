package tools

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/auth"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/logfield"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Resource subscriptions. A client subscribes to any jupyter:// content URI; room events mark
// the documents they touch dirty; once a document has been quiet for subscribeQuiet (or has been
// changing for subscribeMaxDelay) every subscribed URI that depends on it is read again and its
// subscribers are told — only those whose content hash really differs from what they last saw.
// A change to one cell therefore notifies …/cells/{that cell}, the notebook and its JSON, not the
// other cells; a cursor move notifies nothing. Documents with subscribers are kept joined (a
// room subscription pins them against idle closing).
//
// Run consumes room events and does nothing slow: an event only marks what it may have changed
// (marks coalesce per document and listing, so they cannot overflow). The slow work — reads, which
// may join a room, and the joins that keep subscribed documents open, each up to
// subscribeReadWait — runs in goroutines of its own: one read per URI at a time, and a change
// that arrives while that URI is being read makes it read again when done. Should the event
// buffer ever overflow anyway, every followed document is treated as changed: a "this changed"
// signal is never lost.
//
// A subscriber misses no change made after its subscription was acknowledged: the stream of room
// events is opened by whichever comes first, Run or the first subscription (so a change made
// before Run's goroutine is scheduled waits in the buffer), and every new subscription marks what
// it follows as changed, so a change that landed between its first read and its registration is
// read again and notified.

const (
	subscribeQuiet    = 250 * time.Millisecond // debounce: no notification sooner after a change
	subscribeMaxDelay = time.Second            // …but a document changing non-stop still notifies
	subscribeTick     = 100 * time.Millisecond
	subscribeReadWait = 30 * time.Second // a read for a subscription (may join a room)
)

// docKey names a document (not a fork) whose changes subscriptions follow.
type docKey struct {
	path string
	kind ydoc.Kind
}

// dirtyMark is when a document first and last changed since its subscribers were last checked.
type dirtyMark struct{ first, last time.Time }

type subscriptions struct {
	mu       sync.Mutex
	sessions map[string]map[string][32]byte // session → subscribed URI → hash of what it last saw
	// callers are who subscribed, by session: what a subscriber is told of is read again as
	// that caller, through the door, so it never learns of a document it may not see.
	callers map[string]caller
	dirty   map[docKey]dirtyMark
	lists   map[ydoc.Kind]dirtyMark // jupyter://notebooks, jupyter://documents
	current map[string]bool         // sessions whose …/current changed document
	pins    map[docKey]*bridge.Subscription
	listed  map[string]docKey // per-room resources in resources/list, by URI
	collabs map[docKey]string // collaborators as last listed, to tell awareness that matters
	// listens are the subscriptions/listen streams of protocol 2026-07-28 clients, by key:
	// notifications go straight onto the stream's session (mcp-go does not register it).
	listens map[string]listenSink
	listenN int
	// everything is marked when events were lost (the buffer overflowed): every followed
	// document and listing counts as changed.
	everything dirtyMark
	reading    map[string]bool // URIs being read right now (by readJob.key)
	again      map[string]bool // …and changed again meanwhile: read once more when done
	joining    map[docKey]bool // subscribed documents being joined (maintainPins)
	// events is the stream of room events Run consumes, opened by roomEvents; ended is set
	// once Run has returned (no stream is opened again).
	events *bridge.Subscription
	ended  bool
}

type listenSink struct {
	session server.ClientSession
	id      any // the subscriptions/listen request id, which tags what the stream carries
}

func newSubscriptions() *subscriptions {
	return &subscriptions{
		sessions: map[string]map[string][32]byte{}, dirty: map[docKey]dirtyMark{}, lists: map[ydoc.Kind]dirtyMark{},
		current: map[string]bool{}, listens: map[string]listenSink{}, pins: map[docKey]*bridge.Subscription{}, listed: map[string]docKey{}, collabs: map[docKey]string{},
		reading: map[string]bool{}, again: map[string]bool{}, joining: map[docKey]bool{},
		callers: map[string]caller{},
	}
}

// caller is the identity a request came with (none for stdio).
type caller struct {
	id auth.Identity
	ok bool
}

func callerOf(ctx context.Context) caller {
	id, ok := auth.IdentityFrom(ctx)
	return caller{id, ok}
}

// as returns ctx carrying the caller's identity.
func (c caller) as(ctx context.Context) context.Context {
	if !c.ok {
		return ctx
	}
	return auth.WithIdentity(ctx, c.id)
}

// key tells callers apart whose reads may differ.
func (c caller) key() string {
	if !c.ok {
		return ""
	}
	return "\x00" + c.id.Name
}

func hashRead(r resourceRead) [32]byte {
	h := sha256.New()
	h.Write([]byte(r.mime))
	h.Write([]byte{0})
	h.Write([]byte(r.text))
	for _, m := range r.more {
		if t, ok := m.(mcp.TextResourceContents); ok {
			h.Write([]byte{0})
			h.Write([]byte(t.Text))
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// subscribe starts following uri for a session, from its content now. A URI that cannot be read
// is not followed (mcp-go has already acknowledged the subscription; the log says why).
//
// Changes are followed from before the first read: the event stream is open (roomEvents), and
// what the URI depends on is marked changed once it is registered, so a change between the read
// and the registration is read again (and notified only if the content really differs).
func (s *Server) subscribe(ctx context.Context, session, uri string) {
	s.roomEvents()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscribeReadWait)
	defer cancel()
	r, err := s.readURI(ctx, session, uri)
	if err != nil {
		s.log.Info().Str(logfield.URI, uri).Err(err).Msg("subscription to an unreadable resource: not followed")
		return
	}
	doc, list, _, follows := s.depends(session, uri)
	now := time.Now()
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	m := s.subs.sessions[session]
	if m == nil {
		m = map[string][32]byte{}
		s.subs.sessions[session] = m
	}
	m[uri] = hashRead(r)
	s.subs.callers[session] = callerOf(ctx)
	switch {
	case !follows: // jobs are polled while they run; other URIs are not followed
	case strings.HasSuffix(uri, "/current"):
		s.subs.current[session] = true
	case doc.path != "":
		s.subs.dirty[doc] = markNow(s.subs.dirty[doc], now)
	default:
		s.subs.lists[list] = markNow(s.subs.lists[list], now)
	}
}

// roomEvents returns the stream of room events Run consumes, opening it on first use (by Run or
// by the first subscription, whichever comes first); nil once Run has returned.
func (s *Server) roomEvents() *bridge.Subscription {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	if s.subs.events == nil && !s.subs.ended {
		s.subs.events = s.opts.Manager.Subscribe(4096)
	}
	return s.subs.events
}

func (s *Server) unsubscribe(session, uri string) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	if m := s.subs.sessions[session]; m != nil {
		delete(m, uri)
		if len(m) == 0 {
			delete(s.subs.sessions, session)
			delete(s.subs.callers, session)
		}
	}
}

func (s *Server) dropSession(session string) {
	s.subs.mu.Lock()
	delete(s.subs.sessions, session)
	delete(s.subs.callers, session)
	delete(s.subs.current, session)
	s.subs.mu.Unlock()
	s.current.forget(session)
	s.uses.forget(session)
}

// currentMoved says a session's …/current resources may now be another document.
func (s *Server) currentMoved(session string) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	for key := range s.subs.sessions {
		if clientOf(key) == session {
			s.subs.current[key] = true
		}
	}
}

// hooks wires subscriptions and tool listing to mcp-go's request hooks.
func (s *Server) hooks() *server.Hooks {
	h := &server.Hooks{}
	// Tools the caller may not use, or that its session's toolsets leave out, are left out of the
	// listing here rather than with WithToolFilter, which would also turn a call into "tool not
	// found" instead of saying which scope it needs (scope.go) or which toolset holds it
	// (toolsets.go).
	h.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		if res != nil {
			res.Tools = s.listFilter(ctx, s.toolFilter(ctx, res.Tools))
		}
	})
	// The per-room entries of resources/list name documents: the caller sees those it may.
	h.AddAfterListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		if res != nil {
			res.Resources = s.appResourceFilter(ctx, s.resourceFilter(ctx, res.Resources))
		}
	})
	h.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		s.subscribe(ctx, sessionKey(ctx), req.Params.URI)
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		s.unsubscribe(sessionKey(ctx), req.Params.URI)
	})
	h.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		s.dropSession(cs.SessionID())
		s.forgetNotices(cs.SessionID())
		s.sessionSets.forget(cs.SessionID())
	})
	// Protocol 2026-07-28: the URIs come in the filter of a subscriptions/listen request, whose
	// stream lasts as long as the request.
	h.AddBeforeSubscriptionsListen(func(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
		cs := server.ClientSessionFromContext(ctx)
		uris := req.Params.Notifications.ResourceSubscriptions
		if cs == nil || len(uris) == 0 {
			return
		}
		s.subs.mu.Lock()
		s.subs.listenN++
		key := fmt.Sprintf("%s\x00listen-%d", cs.SessionID(), s.subs.listenN)
		s.subs.listens[key] = listenSink{session: cs, id: id}
		s.subs.mu.Unlock()
		for _, uri := range uris {
			s.subscribe(ctx, key, uri)
		}
		go func() { // ends with the stream
			<-ctx.Done()
			s.subs.mu.Lock()
			delete(s.subs.listens, key)
			delete(s.subs.sessions, key)
			delete(s.subs.callers, key)
			s.subs.mu.Unlock()
		}()
	})
	return h
}

// clientOf is the client session a subscription key belongs to (for …/current).
func clientOf(key string) string {
	if i := strings.IndexByte(key, 0); i >= 0 {
		return key[:i]
	}
	return key
}

// notifyUpdated tells a subscriber that uri changed.
func (s *Server) notifyUpdated(key, uri string) error {
	s.metrics.resourceUpdated()
	s.subs.mu.Lock()
	sink, isListen := s.subs.listens[key]
	s.subs.mu.Unlock()
	if !isListen {
		return s.mcp.SendNotificationToSpecificClient(key, mcp.MethodNotificationResourceUpdated, map[string]any{"uri": uri})
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: mcp.MethodNotificationResourceUpdated,
		Params: mcp.NotificationParams{Meta: map[string]any{mcp.MetaKeySubscriptionID: sink.id}, AdditionalFields: map[string]any{"uri": uri}},
	}}
	select {
	case sink.session.NotificationChannel() <- n:
		return nil
	default:
		return errors.New("the client's notification stream is full")
	}
}

// Run follows room events for subscriptions and the per-room entries of resources/list, and
// counts served tokens (accountant.go), until ctx ends. Without it resources still read and
// tokens are counted on the request path; nothing is notified. The reads and joins it starts
// have ended when it returns.
//
// Changes made after a client's subscription are followed even if Run's goroutine starts later
// (subscribe opens the event stream); Run is called once per Server.
func (s *Server) Run(ctx context.Context) error {
	events := s.roomEvents()
	if events == nil {
		return errors.New("tools: Run called again after it returned")
	}
	ctx, cancel := context.WithCancel(ctx)
	acctDone := s.acct.start(ctx) // token accounting (accountant.go), for as long as Run runs
	defer func() {
		cancel()
		<-acctDone
		s.subs.mu.Lock()
		s.subs.ended, s.subs.events = true, nil
		s.subs.mu.Unlock()
		events.Close()
	}()
	return s.follow(ctx, events)
}

// follow is Run on a given event subscription.
func (s *Server) follow(ctx context.Context, events *bridge.Subscription) error {
	for _, r := range s.opts.Manager.Rooms() { // rooms opened before Run
		info := r.Info()
		s.listRoom(r.Path(), info.Kind, info.FileID, info.Status)
	}
	ctx, cancel := context.WithCancel(ctx)
	var work sync.WaitGroup // the follow-up loop and every read and join it starts
	defer func() {
		cancel()
		work.Wait()
		s.unpinAll()
	}()
	work.Add(1)
	go func() {
		defer work.Done()
		s.followUp(ctx, &work)
	}()
	dropped := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-events.C:
			if !ok {
				return nil
			}
			s.noteEvent(e)
			s.notify(e)
			if n := events.Dropped(); n != dropped { // we fell behind: what was lost is unknown
				dropped = n
				s.subs.mu.Lock()
				s.subs.everything = markNow(s.subs.everything, time.Now())
				s.subs.mu.Unlock()
			}
		}
	}
}

// followUp is the slow side of Run: every subscribeTick it starts the reads of ripe URIs, and
// every 2 s the joins that keep subscribed documents open. It never waits for either.
func (s *Server) followUp(ctx context.Context, work *sync.WaitGroup) {
	tick := time.NewTicker(subscribeTick)
	defer tick.Stop()
	lastPins := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.Sub(lastPins) >= 2*time.Second {
				s.maintainPins(ctx, work)
				lastPins = now
			}
			s.flush(ctx, now, work)
		}
	}
}

// markNow extends a dirty mark to now.
func markNow(m dirtyMark, now time.Time) dirtyMark {
	if m.first.IsZero() {
		m.first = now
	}
	m.last = now
	return m
}

// noteEvent marks what a room event may have changed.
func (s *Server) noteEvent(e bridge.Event) {
	s.metrics.roomEvent(e)
	if e.Fork != "" || e.Transient {
		return // forks and awareness-only rooms are not resources
	}
	key := docKey{e.Path, e.DocKind}
	now := time.Now()
	mark := func(m dirtyMark) dirtyMark { return markNow(m, now) }
	switch e.Kind {
	case bridge.EventChanged, bridge.EventReset:
		s.subs.mu.Lock()
		s.subs.dirty[key] = mark(s.subs.dirty[key])
		if e.DocKind == ydoc.KindNotebook && (len(e.Change.Inserted) > 0 || len(e.Change.Deleted) > 0) {
			s.subs.lists[e.DocKind] = mark(s.subs.lists[e.DocKind]) // the cell count
		}
		s.subs.mu.Unlock()
	case bridge.EventSynced, bridge.EventClosed, bridge.EventFailed:
		room := s.opts.Manager.Get(e.Path, e.DocKind)
		status := bridge.StatusClosed
		id := ""
		if room != nil && e.Kind == bridge.EventSynced {
			status, id = room.Info().Status, room.Info().FileID
		}
		s.listRoom(e.Path, e.DocKind, id, status)
		s.subs.mu.Lock()
		s.subs.lists[e.DocKind] = mark(s.subs.lists[e.DocKind])
		if e.Kind == bridge.EventSynced {
			s.subs.dirty[key] = mark(s.subs.dirty[key]) // caught up after a reconnect
		}
		s.subs.mu.Unlock()
	case bridge.EventAwareness:
		room := s.opts.Manager.Get(e.Path, e.DocKind)
		if room == nil {
			return
		}
		var names []string
		for _, c := range collabOf(room.Info()).Collaborators {
			names = append(names, c.Username)
		}
		sig := strings.Join(names, "\x00")
		s.subs.mu.Lock()
		if s.subs.collabs[key] != sig {
			s.subs.collabs[key] = sig
			s.subs.lists[e.DocKind] = mark(s.subs.lists[e.DocKind])
		}
		s.subs.mu.Unlock()
	}
}

// listRoom keeps resources/list showing one entry per open document (mcp-go sends
// notifications/resources/list_changed when the list changes).
func (s *Server) listRoom(p string, kind ydoc.Kind, fileID string, status bridge.Status) {
	if fileID == "" {
		if status == bridge.StatusClosed || status == bridge.StatusFailed {
			s.subs.mu.Lock()
			var gone []string
			for uri, k := range s.subs.listed {
				if k.path == p && k.kind == kind {
					gone = append(gone, uri)
					delete(s.subs.listed, uri)
				}
			}
			s.subs.mu.Unlock()
			if len(gone) > 0 {
				s.mcp.DeleteResources(gone...)
			}
		}
		return
	}
	uri, mime, what := uriNotebooks+"/"+fileID, "text/markdown", "live notebook"
	if kind == ydoc.KindText {
		uri, mime, what = uriDocuments+"/"+fileID, textMime(p), "live text document"
	}
	s.subs.mu.Lock()
	_, had := s.subs.listed[uri]
	s.subs.listed[uri] = docKey{p, kind}
	s.subs.mu.Unlock()
	if had {
		return
	}
	read := func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		r, err := s.readURI(ctx, sessionKey(ctx), req.Params.URI)
		if err != nil {
			return nil, resourceFailure(req.Params.URI, err)
		}
		s.accountResource(req.Params.URI, r)
		return r.contents(req.Params.URI), nil
	}
	s.mcp.AddResource(mcp.NewResource(uri, p, mcp.WithResourceDescription(what+" "+p+" (a room is open: reads are instant, subscriptions follow every change)"), mcp.WithMIMEType(mime)), read)
}

// resourceFilter leaves out of resources/list the per-room entries of documents the caller may
// not see.
func (s *Server) resourceFilter(ctx context.Context, list []mcp.Resource) []mcp.Resource {
	s.subs.mu.Lock()
	listed := make(map[string]docKey, len(s.subs.listed))
	for uri, k := range s.subs.listed {
		listed[uri] = k
	}
	s.subs.mu.Unlock()
	out := list[:0:0]
	for _, r := range list {
		if k, ok := listed[r.URI]; ok && !allowed(ctx, k.path) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// depends returns what a subscribed URI's content depends on: a document, a listing, a job, or
// (for …/current) the session's document.
func (s *Server) depends(session, uri string) (doc docKey, list ydoc.Kind, job string, ok bool) {
	rest, _ := strings.CutPrefix(uri, "jupyter://")
	parts := strings.Split(rest, "/")
	kind := ydoc.KindNotebook
	switch parts[0] {
	case "documents":
		kind = ydoc.KindText
	case "notebooks":
	case "executions":
		if len(parts) == 2 {
			return docKey{}, 0, parts[1], true
		}
		return docKey{}, 0, "", false
	default:
		return docKey{}, 0, "", false // templates, guides, stats: static or not followed
	}
	switch {
	case len(parts) == 1:
		return docKey{}, kind, "", true
	case parts[1] == "current":
		p := s.current.get(clientOf(session), kind)
		return docKey{p, kind}, 0, "", p != ""
	}
	p, k, found := s.opts.Manager.PathOf(parts[1])
	if !found || k != kind {
		return docKey{}, 0, "", false
	}
	return docKey{p, kind}, 0, "", true
}

// ripe says a dirty mark has waited long enough.
func ripe(m dirtyMark, now time.Time) bool {
	return !m.first.IsZero() && (now.Sub(m.last) >= subscribeQuiet || now.Sub(m.first) >= subscribeMaxDelay)
}

// flush starts re-reading the subscribed URIs whose documents are ripe; the reads notify their
// subscribers of real changes (readAndNotify).
func (s *Server) flush(ctx context.Context, now time.Time, work *sync.WaitGroup) {
	s.subs.mu.Lock()
	if len(s.subs.sessions) == 0 {
		clear(s.subs.dirty)
		clear(s.subs.lists)
		clear(s.subs.current)
		s.subs.everything = dirtyMark{}
		s.subs.mu.Unlock()
		return
	}
	all := ripe(s.subs.everything, now)
	reads := map[string]readJob{} // session-independent URIs are read once for all their subscribers
	for session, uris := range s.subs.sessions {
		for uri := range uris {
			doc, list, job, ok := s.depends(session, uri)
			due := false
			switch {
			case !ok:
			case job != "":
				due = s.jobLive(job)
			case doc.path != "":
				due = all || ripe(s.subs.dirty[doc], now) || s.subs.current[session] && strings.HasSuffix(uri, "/current")
			default:
				due = all || ripe(s.subs.lists[list], now)
			}
			if due {
				j := readJob{uri: uri, session: session, who: s.subs.callers[session]}
				reads[j.key()] = j
			}
		}
	}
	for k, m := range s.subs.dirty {
		if ripe(m, now) {
			delete(s.subs.dirty, k)
		}
	}
	for k, m := range s.subs.lists {
		if ripe(m, now) {
			delete(s.subs.lists, k)
		}
	}
	if all {
		s.subs.everything = dirtyMark{}
	}
	clear(s.subs.current)
	var start []readJob
	for key, j := range reads {
		if s.subs.reading[key] {
			s.subs.again[key] = true // being read: read again once that read is done
			continue
		}
		s.subs.reading[key] = true
		start = append(start, j)
	}
	s.subs.mu.Unlock()
	for _, j := range start {
		work.Add(1)
		go func() {
			defer work.Done()
			s.readAndNotify(ctx, j)
		}()
	}
}

// readJob is one read of a subscribed URI: for …/current the session's own, otherwise one read
// for every session subscribed to the URI as the same caller (what a caller is told of is read
// as that caller, through the door).
type readJob struct {
	uri, session string
	who          caller
}

func (j readJob) current() bool { return strings.HasSuffix(j.uri, "/current") }

func (j readJob) key() string {
	if j.current() {
		return j.session + " " + j.uri
	}
	return j.uri + j.who.key()
}

// readAndNotify reads a URI and notifies each of its subscribers whose last seen content
// differs, then reads again as long as a change arrived during the read.
func (s *Server) readAndNotify(ctx context.Context, j readJob) {
	for {
		rctx, cancel := context.WithTimeout(j.who.as(ctx), subscribeReadWait)
		r, err := s.readURI(rctx, j.session, j.uri)
		cancel()
		if err != nil {
			r = resourceRead{mime: "error", text: err.Error()} // e.g. a deleted cell: that is a change too
		}
		sum := hashRead(r)
		var notify []string
		s.subs.mu.Lock()
		for session, uris := range s.subs.sessions {
			if j.current() && session != j.session || s.subs.callers[session].key() != j.who.key() {
				continue
			}
			if prev, ok := uris[j.uri]; ok && prev != sum {
				uris[j.uri] = sum
				notify = append(notify, session)
			}
		}
		s.subs.mu.Unlock()
		for _, session := range notify {
			if err := s.notifyUpdated(session, j.uri); err != nil {
				s.log.Debug().Str(logfield.URI, j.uri).Err(err).Msg("resource update not delivered")
			}
		}
		s.subs.mu.Lock()
		more := s.subs.again[j.key()] && ctx.Err() == nil
		delete(s.subs.again, j.key())
		if !more {
			delete(s.subs.reading, j.key())
		}
		s.subs.mu.Unlock()
		if !more {
			return
		}
	}
}

// jobLive says a job may still change (or finished within the last few seconds, so its final
// state is seen).
func (s *Server) jobLive(id string) bool {
	if s.opts.Executor == nil {
		return false
	}
	j, err := s.opts.Executor.Job(id)
	if err != nil {
		return false
	}
	select {
	case <-j.Done():
		return time.Since(j.View().Ended) < 3*time.Second
	default:
		return true
	}
}

// maintainPins keeps documents with subscribers joined, and lets go of the others. Joins run in
// goroutines of their own (one per document at a time).
func (s *Server) maintainPins(ctx context.Context, work *sync.WaitGroup) {
	want := map[docKey]bool{}
	s.subs.mu.Lock()
	for session, uris := range s.subs.sessions {
		for uri := range uris {
			if doc, _, _, ok := s.depends(session, uri); ok && doc.path != "" {
				want[doc] = true
			}
		}
	}
	var drop []*bridge.Subscription
	for k, sub := range s.subs.pins {
		closed := false
		select {
		case _, ok := <-sub.C:
			closed = !ok
		default:
		}
		if !want[k] || closed {
			drop = append(drop, sub)
			delete(s.subs.pins, k)
		}
	}
	var add []docKey
	for k := range want {
		if _, ok := s.subs.pins[k]; !ok && !s.subs.joining[k] {
			s.subs.joining[k] = true
			add = append(add, k)
		}
	}
	s.subs.mu.Unlock()
	for _, sub := range drop {
		sub.Close()
	}
	for _, k := range add {
		work.Add(1)
		go func() {
			defer work.Done()
			s.pin(ctx, k)
		}()
	}
}

// pin joins a subscribed document and holds its room open.
func (s *Server) pin(ctx context.Context, k docKey) {
	defer func() {
		s.subs.mu.Lock()
		delete(s.subs.joining, k)
		s.subs.mu.Unlock()
	}()
	octx, cancel := context.WithTimeout(ctx, subscribeReadWait)
	room, err := s.opts.Manager.Open(octx, k.path, k.kind)
	cancel()
	if err != nil {
		s.log.Debug().Str(logfield.Path, k.path).Err(err).Msg("cannot keep a subscribed document joined")
		return
	}
	sub := room.Subscribe(1) // a pin: events come from the manager's stream; this one only holds the room
	s.subs.mu.Lock()
	_, had := s.subs.pins[k]
	if !had && ctx.Err() == nil {
		s.subs.pins[k] = sub
	}
	s.subs.mu.Unlock()
	if had || ctx.Err() != nil {
		sub.Close()
	}
}

// pinned reports whether subscriptions keep a document joined.
func (s *Server) pinned(k docKey) bool {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	_, ok := s.subs.pins[k]
	return ok
}

func (s *Server) unpinAll() {
	s.subs.mu.Lock()
	pins := s.subs.pins
	s.subs.pins = map[docKey]*bridge.Subscription{}
	s.subs.mu.Unlock()
	for _, sub := range pins {
		sub.Close()
	}
}
