package gendoc

import (
	"strings"
	"testing"
)

func TestSpliceReplacesOnlyTheSection(t *testing.T) {
	page := "# T\n\nprose\n<!-- generated:a -->\nold\nlines\n<!-- /generated:a -->\nmore prose\n"
	got, err := Splice([]byte(page), "a", "new")
	if err != nil {
		t.Fatal(err)
	}
	want := "# T\n\nprose\n<!-- generated:a -->\nnew\n<!-- /generated:a -->\nmore prose\n"
	if string(got) != want {
		t.Errorf("Splice = %q, want %q", got, want)
	}
	again, _ := Splice(got, "a", "new\n")
	if string(again) != want {
		t.Errorf("a second splice changed the page: %q", again)
	}
}

func TestSpliceNeedsBothMarkers(t *testing.T) {
	for _, page := range []string{"no markers\n", "<!-- generated:a -->\nunterminated\n", "<!-- generated:b -->\n<!-- /generated:b -->\n"} {
		if _, err := Splice([]byte(page), "a", "x"); err == nil || !strings.Contains(err.Error(), "generated section a") {
			t.Errorf("Splice of %q: %v, want an error naming the section", page, err)
		}
	}
}
