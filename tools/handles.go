package tools

import (
	"fmt"
	"sort"
	"strings"
)

// Cell handles: the shortest prefix of a cell's id, at least minHandle characters, that no other
// cell's id in the notebook starts with. Reads show handles instead of ids (a UUID costs a model
// about 25 tokens, its handle 3); every argument that names a cell takes a handle or a full id,
// resolved by the door (door.go) against the cells the notebook has when the call arrives. A
// handle keeps naming its cell as long as no cell whose id shares it appears; one that has become
// ambiguous is refused with the candidates, never guessed.

// minHandle is the shortest handle: 4 hex characters tell 65,536 ids apart, so a handle in a
// notebook of hundreds of cells rarely needs a fifth, and a cell added later rarely makes one
// ambiguous.
const minHandle = 4

// cellHandles returns each id's handle.
func cellHandles(ids []string) map[string]string {
	sorted := make([]string, len(ids))
	copy(sorted, ids)
	sort.Strings(sorted)
	out := make(map[string]string, len(ids))
	for i, id := range sorted {
		need := 0 // the longest prefix shared with a neighbour in sorted order
		if i > 0 {
			need = max(need, commonPrefix(id, sorted[i-1]))
		}
		if i+1 < len(sorted) {
			need = max(need, commonPrefix(id, sorted[i+1]))
		}
		n := min(max(need+1, minHandle), len(id)) // an id that prefixes another is its own handle
		out[id] = id[:n]
	}
	return out
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// resolveCell returns the id of the cell a handle (or full id) names among ids: the cell with
// exactly that id, or the only one whose id starts with it.
func resolveCell(ids []string, h string) (string, error) {
	matches := matchCells(ids, h)
	switch len(matches) {
	case 1:
		if h == "" {
			return "", fmt.Errorf("an empty cell id")
		}
		return matches[0], nil
	case 0:
		return "", fmt.Errorf("no cell with id %q (the notebook has %d cells; re-read it for current handles)", h, len(ids))
	}
	sort.Strings(matches)
	shown := matches
	if len(shown) > 5 {
		shown = shown[:5]
	}
	return "", fmt.Errorf("the handle %q is ambiguous: it starts the ids %s; give more of the id", h, strings.Join(quoteAll(shown), ", "))
}

// matchCells returns the ids a handle may name: the one equal to it, or every one it starts.
func matchCells(ids []string, h string) []string {
	var matches []string
	for _, id := range ids {
		if id == h {
			return []string{id}
		}
		if strings.HasPrefix(id, h) {
			matches = append(matches, id)
		}
	}
	return matches
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}
