package journal

// What a log's records say about its lineages, and compaction.
//
// A lineage is at risk when it holds work no save is known to cover: the current (last) lineage
// when a content update came after the last save's covered seq; an earlier one when it also
// waits for a rescue decision (a later lineage names it lost, and no decision was logged). Any
// state an at-risk lineage held since its last save may be what the file holds after a crash
// (a save the server never reported), so compaction keeps, of the current lineage, everything
// from a base at or before the state of the second-to-last save (a save marker may lag behind
// the save it reports), and of earlier lineages only the at-risk ones, whole.

// lineageSum summarizes one lineage of an index.
type lineageSum struct {
	id          uint64
	first, end  int    // its entries are index[first:end]
	pending     bool   // a later lineage names it lost
	decided     bool   // a decision about it was logged
	covers      uint64 // the last save's covered seq (0: no save)
	prevCovers  uint64 // the save before it
	lastContent uint64 // the last content update's seq (0: none)
}

func (s lineageSum) atRisk(current bool) bool {
	if s.decided || s.lastContent <= s.covers {
		return false
	}
	return current || s.pending
}

type summary struct {
	lineages []lineageSum
}

func summarize(index []entry) summary {
	var sum summary
	byID := map[uint64]int{}
	var decided, lost []uint64
	for i, e := range index {
		switch e.typ {
		case TypeLineage:
			if n := len(sum.lineages); n > 0 {
				sum.lineages[n-1].end = i
			}
			byID[e.seq] = len(sum.lineages)
			sum.lineages = append(sum.lineages, lineageSum{id: e.seq, first: i})
			if e.arg != 0 {
				lost = append(lost, e.arg)
			}
			continue
		case TypeDecided:
			decided = append(decided, e.arg)
		}
		n := len(sum.lineages)
		if n == 0 {
			continue
		}
		cur := &sum.lineages[n-1]
		switch e.typ {
		case TypeSaved:
			if e.arg > cur.covers {
				cur.prevCovers, cur.covers = cur.covers, e.arg
			}
		case TypeUpdate:
			if e.flags&FlagContent != 0 {
				cur.lastContent = e.seq
			}
		}
	}
	if n := len(sum.lineages); n > 0 {
		sum.lineages[n-1].end = len(index)
	}
	for _, id := range lost {
		if i, ok := byID[id]; ok {
			sum.lineages[i].pending = true
		}
	}
	for _, id := range decided {
		if i, ok := byID[id]; ok {
			sum.lineages[i].decided = true
		}
	}
	return sum
}

// atRisk reports whether any lineage is at risk.
func (s summary) atRisk() bool { return s.oldestAtRisk() != 0 }

// oldestAtRisk returns the oldest lineage at risk (0: none).
func (s summary) oldestAtRisk() uint64 {
	for i, ls := range s.lineages {
		if ls.atRisk(i == len(s.lineages)-1) {
			return ls.id
		}
	}
	return 0
}

// plan chooses what compaction keeps: the header, the earlier lineages at risk (whole), and the
// current lineage from its cut on. The cut is the latest base at or before the second-to-last
// save's covered seq; forced (the log is over its bound), the latest base at all.
func plan(index []entry, force bool) (keep []entry, dead int64) {
	sum := summarize(index)
	n := len(sum.lineages)
	if n == 0 {
		return index, 0
	}
	kept := map[uint64]bool{}
	for _, ls := range sum.lineages[:n-1] {
		if ls.atRisk(false) {
			kept[ls.id] = true
		}
	}
	cur := sum.lineages[n-1]
	var cut uint64
	for _, e := range index[cur.first:cur.end] {
		if e.typ == TypeBase && (force || e.seq <= cur.prevCovers) {
			cut = e.seq
		}
	}
	var total, live int64
	for _, e := range index {
		total += int64(e.size)
		var k bool
		switch {
		case e.typ == TypeHeader:
			k = true
		case e.lineage == cur.id:
			k = e.typ == TypeLineage || (e.typ != TypeDecided && e.seq >= cut)
		case kept[e.lineage]:
			k = true
		case e.typ == TypeLineage && kept[e.arg]:
			k = true // it names a kept lineage lost: without it that lineage would not be pending
		}
		if k {
			keep = append(keep, e)
			live += int64(e.size)
		}
	}
	return keep, total - live
}

// compactLocked rewrites the log without what plan drops, when that is worth it: at least
// CompactMin bytes, and half of what stays or four times CompactMin; always when forced or over
// MaxLogBytes (wmu held).
func (l *Log) compactLocked(force bool) {
	l.checkSave = false
	size := l.med.size()
	over := size > l.s.opts.MaxLogBytes
	keep, dead := plan(l.index, force || over)
	min := l.s.opts.CompactMin
	if dead <= 0 || (!force && !over && (dead < min || (dead < (size-dead)/2 && dead < 4*min))) {
		return
	}
	raw, err := l.med.all()
	if err != nil {
		l.failLocked(err, size)
		return
	}
	content := make([]byte, 0, size-dead)
	index := make([]entry, 0, len(keep))
	for _, e := range keep {
		frame := raw[e.off : e.off+int64(e.size)]
		e.off = int64(len(content))
		content = append(content, frame...)
		index = append(index, e)
	}
	if err := l.med.replace(content); err != nil {
		l.failLocked(err, size)
		return
	}
	l.index = index
	l.unsynced = false // replace writes and syncs
	if n := len(index); n > 0 {
		l.markSynced(index[n-1].seq)
	}
	l.s.stats.compactions.Add(1)
	if over || force {
		l.s.log.Info().Str("log", l.name).Int64("bytes_before", size).Int64("bytes_after", int64(len(content))).Bool("forced", true).
			Msg("compacted the journal of a document at the latest base")
	}
}
