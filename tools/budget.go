package tools

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Response budgets: every tool that returns content takes max_tokens (default
// --max-response-tokens, 20,000, under the 25,000 some clients reject). Reads that page by cells
// or lines (get_notebook, get_document) cut at a cell or line boundary themselves and say how to
// read on; for the others the longest list in the result is shortened from the end.

var maxTokensField = unlisted("max_tokens", integer(fmt.Sprintf("Upper bound of the response in tokens (default: the server's --max-response-tokens, %d).", DefaultMaxResponseTokens)+" Content is cut at a cell (or line, or item) boundary, and the result says what was left out and how to read it.").min(100).max(2000000))

// maxTokensOf returns the call's token budget.
func (s *Server) maxTokensOf(args map[string]any) int {
	switch v := args["max_tokens"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return int(n)
		}
	}
	return s.opts.MaxResponseTokens
}

// fitTokens shortens a JSON result over budget: the longest list in it loses items from the end
// until the result fits. Results with their own rendering (Text) page themselves.
func (s *Server) fitTokens(res result, budget int) result {
	if res.Text != "" {
		return res
	}
	data, ok := res.Data.(map[string]any)
	if !ok {
		return res
	}
	b, err := json.Marshal(data)
	if err != nil {
		return res
	}
	if len(b) < budget*2 { // under two bytes a token no JSON exceeds the budget: skip counting
		return res
	}
	total := s.tokens.Count(string(b))
	if total <= budget {
		return res
	}
	// The longest list field (by encoded size) is the one to shorten.
	type cand struct {
		key  string
		list []any
		size int
	}
	var cands []cand
	for k, v := range data {
		raw, _ := json.Marshal(v)
		var list []any
		if json.Unmarshal(raw, &list) == nil && len(list) > 1 {
			cands = append(cands, cand{k, list, len(raw)})
		}
	}
	if len(cands) == 0 {
		return res
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].size > cands[j].size })
	c := cands[0]
	out := make(map[string]any, len(data)+1)
	for k, v := range data {
		out[k] = v
	}
	fits := func(n int) (bool, int) {
		out[c.key] = c.list[:n]
		bb, _ := json.Marshal(out)
		t := s.tokens.Count(string(bb))
		return t <= budget, t
	}
	lo, hi := 1, len(c.list)-1 // keep at least one item
	keep := 1
	for lo <= hi {
		mid := (lo + hi) / 2
		if ok, _ := fits(mid); ok {
			keep, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	out[c.key] = c.list[:keep]
	out["truncated"] = map[string]any{
		"field": c.key, "returned": keep, "total": len(c.list),
		"reason": fmt.Sprintf("max_tokens %d (the whole result is about %d tokens)", budget, total),
		"hint":   "raise max_tokens, or ask for less (a cell range, fewer cells, a lower limit)",
	}
	res.Data = out
	_, kept := fits(keep)
	if res.Saved == nil {
		res.Saved = map[string]int{}
	}
	res.Saved[savedCaps] += max(total-kept, 0)
	return res
}
