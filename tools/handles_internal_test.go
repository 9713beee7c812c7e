package tools

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCellHandles(t *testing.T) {
	for _, c := range []struct {
		ids  []string
		want map[string]string
	}{
		{[]string{"a1b2c3d4", "a1b2ffff", "0000aaaa"}, map[string]string{"a1b2c3d4": "a1b2c", "a1b2ffff": "a1b2f", "0000aaaa": "0000"}},
		{[]string{"x", "xy", "xyz-long"}, map[string]string{"x": "x", "xy": "xy", "xyz-long": "xyz-"}},
		{[]string{"agent-md", "agent-code"}, map[string]string{"agent-md": "agent-m", "agent-code": "agent-c"}},
		{[]string{"only-one-cell"}, map[string]string{"only-one-cell": "only"}},
	} {
		got := cellHandles(c.ids)
		for id, want := range c.want {
			if got[id] != want {
				t.Errorf("%v: handle of %q = %q, want %q", c.ids, id, got[id], want)
			}
			if r, err := resolveCell(c.ids, got[id]); err != nil || r != id {
				t.Errorf("%v: %q resolves to %q, %v", c.ids, got[id], r, err)
			}
		}
	}
}

// Every handle among thousands of random ids names its own cell, and is short. The ids are
// UUID-shaped from a fixed seed: the longest handle among random ids depends on chance (two of
// 3,000 share 7 characters in about one run in sixty), so the bound is checked on one draw.
func TestCellHandlesOfManyCells(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 14))
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	}
	hs := cellHandles(ids)
	longest := 0
	for _, id := range ids {
		h := hs[id]
		if !strings.HasPrefix(id, h) || len(h) < minHandle {
			t.Fatalf("handle %q of %q", h, id)
		}
		if r, err := resolveCell(ids, h); err != nil || r != id {
			t.Fatalf("%q resolves to %q, %v", h, r, err)
		}
		longest = max(longest, len(h))
	}
	if longest > 7 {
		t.Errorf("a handle of %d characters among 3,000 cells", longest)
	}
}

func TestResolveCellRefusals(t *testing.T) {
	ids := []string{"abcd1111", "abcd2222", "ffff0000"}
	if _, err := resolveCell(ids, "abcd"); err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), `"abcd1111", "abcd2222"`) {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := resolveCell(ids, "9999"); err == nil || !strings.Contains(err.Error(), `no cell with id "9999"`) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := resolveCell(ids, ""); err == nil {
		t.Error("an empty handle resolved")
	}
}
