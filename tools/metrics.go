package tools

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
)

// metrics are the Prometheus series of the MCP surface and its rooms. Counters are fed where
// things happen (tool calls, room events); room gauges are read from the manager at scrape
// time, so they cannot drift from the rooms' own state.
type metrics struct {
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	events    *prometheus.CounterVec
	resources *prometheus.CounterVec
	rejected  *prometheus.CounterVec
}

// metricLabelOutcomes: ok, error (the tool failed), denied (scope or path), invalid (arguments).
func newMetrics(reg prometheus.Registerer, manager *bridge.Manager, events *eventStore, flush func(context.Context)) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jcm_tool_calls_total", Help: "MCP tool calls by tool and outcome (ok, error, denied, invalid).",
		}, []string{"tool", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jcm_tool_call_duration_seconds",
			Help:    "Duration of MCP tool calls by tool (edits include the server's confirmation).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120},
		}, []string{"tool"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jcm_tokens_served_total", Help: "Tokens (by the configured tokenizer) returned to models, by tool or resources/read.",
		}, []string{"tool"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jcm_room_events_total", Help: "Room state transitions: disconnected (each starts a reconnect), synced, reset, failed; notice: agents were told of work a server crash lost or that could not be restored.",
		}, []string{"event"}),
		resources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jcm_resource_updates_total", Help: "notifications/resources/updated sent to subscribers.",
		}, []string{}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jcm_http_rejected_total", Help: "HTTP requests refused before MCP: missing, invalid, unavailable (token), host, origin, rate_limited, concurrency.",
		}, []string{"reason"}),
	}
	resume := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jcm_http_resume_buffer_bytes", Help: "SSE events kept for HTTP clients to resume (bounded per session).",
	}, func() float64 { return float64(events.size()) })
	for _, c := range []prometheus.Collector{m.calls, m.latency, flushingCollector{flush, m.tokens}, m.events, m.resources, m.rejected, resume, roomCollector{manager}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeCall(tool, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(tool, outcome).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
}

func (m *metrics) served(tool string, tokens int) {
	if m == nil || tokens <= 0 {
		return
	}
	m.tokens.WithLabelValues(tool).Add(float64(tokens))
}

func (m *metrics) roomEvent(e bridge.Event) {
	if m == nil {
		return
	}
	switch e.Kind {
	case bridge.EventDisconnected, bridge.EventSynced, bridge.EventReset, bridge.EventFailed, bridge.EventNotice:
		m.events.WithLabelValues(e.Kind.String()).Inc()
	}
}

func (m *metrics) resourceUpdated() {
	if m == nil {
		return
	}
	m.resources.WithLabelValues().Inc()
}

// roomCollector reports the open rooms at scrape time.
type roomCollector struct{ manager *bridge.Manager }

var (
	descRooms = prometheus.NewDesc("jcm_rooms_open", "Open document rooms by kind and status.", []string{"kind", "status"}, nil)
	descPeers = prometheus.NewDesc("jcm_room_peers", "Collaborators (other awareness clients) across open rooms.", nil, nil)
	descLag   = prometheus.NewDesc("jcm_room_sync_lag_seconds", "Longest time any open room has been out of sync with the server (0 when all are synced).", nil, nil)
	descPend  = prometheus.NewDesc("jcm_room_pending_edits", "Edits sent to the server and not yet confirmed, across rooms.", nil, nil)
	descRecon = prometheus.NewDesc("jcm_room_reconnects", "Reconnects of the currently open rooms since each joined.", nil, nil)
	descRepl  = prometheus.NewDesc("jcm_room_replica_bytes", "Encoded size of the open rooms' replicas (Yjs updates, tombstones included), as each room last measured it (on joining, from the server's first sync; then at most every 5 s after a change, less often for large documents).", nil, nil)
	descHist  = prometheus.NewDesc("jcm_room_history_bytes", "Content kept for restorable versions across open rooms (bounded by --history-budget-mb per room).", nil, nil)
	descSaves = prometheus.NewDesc("jcm_room_save_requests_total", "Save requests the save guard sent (asked) and their answers: success, skipped, failed, timeout, disconnected.", []string{"outcome"}, nil)
	descSaved = prometheus.NewDesc("jcm_room_saves_reported_total", "Saves jupyter-server reported in the rooms' state (its own autosaves and the ones asked for).", nil, nil)
	descAge   = prometheus.NewDesc("jcm_room_unsaved_age_seconds", "Age of the oldest change jupyter-server has not saved, across open rooms (0 when everything is saved).", nil, nil)
	descTook  = prometheus.NewDesc("jcm_room_save_request_seconds_total", "Time the answered save requests took (request to answer), summed; with jcm_room_save_requests_timed_total, the mean.", nil, nil)
	descTimed = prometheus.NewDesc("jcm_room_save_requests_timed_total", "Answered save requests whose time is in jcm_room_save_request_seconds_total.", nil, nil)
	descJLogs = prometheus.NewDesc("jcm_journal_logs", "Documents whose write-ahead log is open (held by a room).", []string{"durable"}, nil)
	descJByte = prometheus.NewDesc("jcm_journal_bytes", "Size of the open write-ahead logs.", nil, nil)
	descJRecs = prometheus.NewDesc("jcm_journal_records_total", "Records appended to the write-ahead logs (updates, lineages, saves, bases, decisions).", nil, nil)
	descJApp  = prometheus.NewDesc("jcm_journal_appended_bytes_total", "Bytes appended to the write-ahead logs.", nil, nil)
	descJSync = prometheus.NewDesc("jcm_journal_fsync_seconds", "Latency of the write-ahead logs' fsyncs (group commit).", nil, nil)
	descJComp = prometheus.NewDesc("jcm_journal_compactions_total", "Write-ahead logs rewritten without what no rescue needs any more.", nil, nil)
	descJTorn = prometheus.NewDesc("jcm_journal_truncated_total", "Torn or damaged tails cut off a write-ahead log when it was opened (a crash while appending).", nil, nil)
	descJDrop = prometheus.NewDesc("jcm_journal_dropped_total", "Records dropped because the disk did not keep up (until the next base), and logs dropped from memory over its bound.", nil, nil)
	descJErr  = prometheus.NewDesc("jcm_journal_errors_total", "Write and fsync errors of the write-ahead logs.", nil, nil)
)

func (c roomCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRooms, descPeers, descLag, descPend, descRecon, descRepl, descHist, descSaves, descSaved, descAge,
		descTook, descTimed, descJLogs, descJByte, descJRecs, descJApp, descJSync, descJComp, descJTorn, descJDrop, descJErr} {
		ch <- d
	}
}

func (c roomCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ kind, status string }
	rooms := map[key]int{}
	peers, pending, reconnects := 0, 0, 0
	lag, unsaved := 0.0, 0.0
	now := time.Now()
	replica, history := 0, 0
	for _, r := range c.manager.Rooms() {
		sz := r.Sizes() // as the room last measured it: no engine lock, no wait
		replica += sz.ReplicaBytes
		history += sz.HistoryBytes
		info := r.Info()
		rooms[key{info.Kind.String(), string(info.Status)}]++
		peers += len(info.Collaborators)
		pending += info.PendingEdits
		reconnects += info.Reconnects
		if info.Status != bridge.StatusSynced && !info.SyncedAt.IsZero() {
			lag = max(lag, now.Sub(info.SyncedAt).Seconds())
		}
		if !info.UnsavedSince.IsZero() {
			unsaved = max(unsaved, now.Sub(info.UnsavedSince).Seconds())
		}
	}
	st := c.manager.SaveStats()
	for _, o := range []struct {
		name string
		n    int64
	}{{"asked", st.Asked}, {"success", st.Success}, {"skipped", st.Skipped}, {"failed", st.Failed}, {"timeout", st.TimedOut}, {"disconnected", st.Disconnected}} {
		ch <- prometheus.MustNewConstMetric(descSaves, prometheus.CounterValue, float64(o.n), o.name)
	}
	ch <- prometheus.MustNewConstMetric(descSaved, prometheus.CounterValue, float64(st.Marked))
	ch <- prometheus.MustNewConstMetric(descTook, prometheus.CounterValue, st.TookSeconds)
	ch <- prometheus.MustNewConstMetric(descTimed, prometheus.CounterValue, float64(st.Timed))
	if js, ok := c.manager.JournalStats(); ok {
		ch <- prometheus.MustNewConstMetric(descJLogs, prometheus.GaugeValue, float64(js.Logs), strconv.FormatBool(js.Durable))
		ch <- prometheus.MustNewConstMetric(descJByte, prometheus.GaugeValue, float64(js.Bytes))
		ch <- prometheus.MustNewConstMetric(descJRecs, prometheus.CounterValue, float64(js.Records))
		ch <- prometheus.MustNewConstMetric(descJApp, prometheus.CounterValue, float64(js.AppendedBytes))
		buckets := map[float64]uint64{}
		for i, b := range js.SyncBuckets {
			buckets[b] = js.SyncCounts[i]
		}
		ch <- prometheus.MustNewConstHistogram(descJSync, js.Syncs, js.SyncSeconds, buckets)
		ch <- prometheus.MustNewConstMetric(descJComp, prometheus.CounterValue, float64(js.Compactions))
		ch <- prometheus.MustNewConstMetric(descJTorn, prometheus.CounterValue, float64(js.Truncated))
		ch <- prometheus.MustNewConstMetric(descJDrop, prometheus.CounterValue, float64(js.Dropped))
		ch <- prometheus.MustNewConstMetric(descJErr, prometheus.CounterValue, float64(js.Errors))
	}
	ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, unsaved)
	for k, n := range rooms {
		ch <- prometheus.MustNewConstMetric(descRooms, prometheus.GaugeValue, float64(n), k.kind, k.status)
	}
	ch <- prometheus.MustNewConstMetric(descPeers, prometheus.GaugeValue, float64(peers))
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lag)
	ch <- prometheus.MustNewConstMetric(descPend, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(descRecon, prometheus.GaugeValue, float64(reconnects))
	ch <- prometheus.MustNewConstMetric(descRepl, prometheus.GaugeValue, float64(replica))
	ch <- prometheus.MustNewConstMetric(descHist, prometheus.GaugeValue, float64(history))
}

// CountRejected counts an HTTP request refused before it reached MCP (reason: missing,
// invalid, unavailable, host, origin, rate_limited, concurrency). A no-op without metrics.
func (s *Server) CountRejected(reason string) {
	if s.metrics == nil {
		return
	}
	s.metrics.rejected.WithLabelValues(reason).Inc()
}
