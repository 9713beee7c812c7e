package ydoc

import (
	"slices"
)

// Chaining local updates. A replica's own edits each produce one v1 update holding structs of
// its own client only, each starting where the one before ended, and the ranges it deleted. A
// run of such updates can travel as one: the structs back to back under one header, the delete
// sets as their union. The server then takes one message where it took many (apply, store,
// broadcast: its fixed cost per message is most of what a small edit costs it), and applies
// exactly what the parts would have. Nothing of y-crdt is involved: the parts are spliced as
// bytes, after each was checked by the same parser every update from the network goes through.

// chainPart is one local update taken apart for chaining.
type chainPart struct {
	structs      []byte // the encoded structs, without their header
	n            int    // how many structs
	client       uint64
	clock, end   uint64 // the first struct's clock and the clock after the last
	deletes      []IDRange
	hasStructs   bool
	originalSize int
}

// splitLocalUpdate takes a v1 update apart if it can be chained: at most one client's structs,
// no skips. It reports false for anything else (left as it is). It reads the update with the
// parser ParseUpdate uses (readStruct, readDeleteSet), so what it takes apart is valid.
func splitLocalUpdate(b []byte) (chainPart, bool) {
	var p chainPart
	d := newDecoder(b)
	nClients, err := d.length(3)
	if err != nil || nClients > 1 {
		return p, false
	}
	if nClients == 1 {
		n, err := d.length(1)
		if err != nil {
			return p, false
		}
		if p.client, err = d.varUint(); err != nil {
			return p, false
		}
		if p.clock, err = d.varUint(); err != nil {
			return p, false
		}
		start, clock := d.pos, p.clock
		for range n {
			length, skip, err := readStruct(d)
			if err != nil || skip || clock+length > maxClock || clock+length < clock {
				return p, false
			}
			clock += length
		}
		p.structs, p.n, p.end, p.hasStructs = b[start:d.pos], n, clock, n > 0
	}
	if p.deletes, err = readDeleteSet(d); err != nil || !d.done() {
		return p, false
	}
	p.originalSize = len(b)
	return p, true
}

// chainUpdates joins parts whose structs follow each other (same client, each beginning at the
// clock where the previous ended) into one v1 update.
func chainUpdates(parts []chainPart) ([]byte, bool) {
	var client, next uint64
	n, size, started := 0, 0, false
	deletes := IDSet{}
	for _, p := range parts {
		size += p.originalSize
		deletes.AddAll(p.deletes)
		if !p.hasStructs {
			continue
		}
		if started && (p.client != client || p.clock != next) {
			return nil, false
		}
		if !started {
			client, started = p.client, true
		}
		next = p.end
		n += p.n
	}
	out := make([]byte, 0, size)
	if started {
		out = appendVarUint(out, 1)
		out = appendVarUint(out, uint64(n))
		out = appendVarUint(out, client)
		for _, p := range parts {
			if p.hasStructs {
				out = appendVarUint(out, p.clock)
				break
			}
		}
		for _, p := range parts {
			out = append(out, p.structs...)
		}
	} else {
		out = appendVarUint(out, 0)
	}
	return appendDeleteSet(out, deletes), true
}

// appendDeleteSet writes a delete set in v1 form, clients in ascending order.
func appendDeleteSet(b []byte, s IDSet) []byte {
	clients := make([]uint64, 0, len(s))
	for c, rs := range s {
		if len(rs) > 0 {
			clients = append(clients, c)
		}
	}
	slices.Sort(clients)
	b = appendVarUint(b, uint64(len(clients)))
	for _, c := range clients {
		b = appendVarUint(b, c)
		b = appendVarUint(b, uint64(len(s[c])))
		for _, r := range s[c] {
			b = appendVarUint(b, r.Clock)
			b = appendVarUint(b, r.Len)
		}
	}
	return b
}

// ChainLocalUpdates returns frames with every run of consecutive sync update frames that can
// travel as one (local updates of one client, each following the one before) replaced by one
// frame carrying them all. A sync step 1 inside a run (a replica asks for the server's state
// behind a delete-only edit, whose confirmation no echo brings) goes after the run, the last one
// only: its answer then covers more, never less. Every other frame stays where it was, and
// frames that cannot be chained are passed on unchanged.
func ChainLocalUpdates(frames [][]byte) [][]byte {
	out := make([][]byte, 0, len(frames))
	var run []chainPart
	var runFrames [][]byte
	var stepOne []byte      // the last step 1 met inside the run
	var client, next uint64 // the run's client and the clock its next structs must begin at
	haveStructs := false
	flush := func() {
		switch {
		case len(run) > 1:
			if b, ok := chainUpdates(run); ok {
				out = append(out, EncodeSync(SyncUpdate, b))
			} else {
				out = append(out, runFrames...)
			}
		case len(run) == 1:
			out = append(out, runFrames[0])
		}
		if stepOne != nil {
			out = append(out, stepOne)
		}
		run, runFrames, haveStructs, stepOne = run[:0], runFrames[:0], false, nil
	}
	for _, fb := range frames {
		f, err := DecodeFrame(fb)
		if err == nil && f.Type == MsgSync && f.Sync == SyncStep1 && len(run) > 0 {
			stepOne = fb
			continue
		}
		if err != nil || f.Type != MsgSync || f.Sync != SyncUpdate {
			flush()
			out = append(out, fb)
			continue
		}
		p, ok := splitLocalUpdate(f.Payload)
		if !ok {
			flush()
			out = append(out, fb)
			continue
		}
		if p.hasStructs {
			if haveStructs && (p.client != client || p.clock != next) {
				flush()
			}
			if !haveStructs {
				client = p.client
			}
			haveStructs, next = true, p.end
		}
		run = append(run, p)
		runFrames = append(runFrames, fb)
	}
	flush()
	return out
}
