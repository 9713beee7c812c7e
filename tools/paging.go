package tools

import (
	"unicode/utf8"
)

// Reading long content in pages, shared by notebooks (cells) and text documents (lines), and by
// the resources and prompts built on them: pieces are shown whole, in order, until a budget of
// characters or tokens is spent; when even the first piece is over the budget, a cut version of
// it is shown. The result says what was returned and how to read on.

// pageBudget is what one read may return.
type pageBudget struct {
	chars  int // code points
	tokens int // tokens of the server's encoding
}

// page is what fitted in a budget.
type page struct {
	pieces []string // the pieces shown, rendered, in order
	cut    bool     // the first piece alone was over the budget: pieces[0] is its cut rendering
	hit    string   // the budget that ended the page ("chars" or "tokens"; "" when all fitted)
}

// fitPage renders pieces 0..n-1 (piece) until the budget is spent. cut renders the first piece
// shortened to fit what is left (of which the page says which budget it broke).
func (s *Server) fitPage(n int, b pageBudget, piece func(k int) string, cut func(k int, b pageBudget) string) page {
	var p page
	for k := 0; k < n; k++ {
		text := piece(k)
		c, t := utf8.RuneCountInString(text), s.tokens.Count(text)
		if c > b.chars || t > b.tokens {
			p.hit = "tokens"
			if c > b.chars {
				p.hit = "chars"
			}
			if k == 0 {
				p.pieces, p.cut = append(p.pieces, cut(0, b)), true
			}
			return p
		}
		b.chars -= c
		b.tokens -= t
		p.pieces = append(p.pieces, text)
	}
	return p
}

// pageUnit names a kind of piece in the truncation report.
type pageUnit struct {
	returned string // key of the inclusive range returned: returned_cells, returned_lines
	rangeArg string // the argument that reads on: cell_range, line_range
	cutKey   string // key of the piece shown cut: cut_cell, cut_line
	cutNote  string // what to do about the cut piece
}

var (
	cellPages = pageUnit{"returned_cells", "cell_range", "cut_cell",
		"that cell alone exceeds the budget: its source was cut and its outputs left out; raise max_content_length or max_tokens to read it whole"}
	linePages = pageUnit{"returned_lines", "line_range", "cut_line",
		"that line alone exceeds max_content_length and was cut; raise max_content_length to read it whole"}
)

// truncation is the "truncated" object of a read that did not return everything it was asked
// for: the range returned, why, where the next call starts (nil: nothing left but a cut piece),
// and which piece was shown cut (nil: none).
func truncation(u pageUnit, start, end int, reason string, next map[string]any, cutAt *int) map[string]any {
	t := map[string]any{u.returned: map[string]int{"start": start, "end": end}, "reason": reason}
	if next != nil {
		t["next_call"] = next
	}
	if cutAt != nil {
		t[u.cutKey] = *cutAt
		t["note"] = u.cutNote
	}
	return t
}

// nextRange is the next_call of a read going on from start to end (inclusive).
func nextRange(u pageUnit, start, end int) map[string]any {
	return map[string]any{u.rangeArg: map[string]int{"start": start, "end": end}}
}
