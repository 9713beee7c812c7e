// Package gendoc keeps the generated sections of the docs/ pages in step with the code they
// describe. A section is the text between the lines <!-- generated:NAME --> and
// <!-- /generated:NAME -->; the prose around it is written by hand. A package's test renders
// each section from the code and calls Check, which fails when the page differs (so `go test
// ./...` catches drift) or, with update set (`make docs`), writes the page with the new sections.
// It is used by tests only.
package gendoc

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// Check compares the named sections of the page at path with their rendering from the code,
// or rewrites them when update is set.
func Check(t testing.TB, path string, sections map[string]string, update bool) {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := page
	for name, text := range sections {
		if want, err = Splice(want, name, text); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if bytes.Equal(page, want) {
		return
	}
	if update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: generated sections rewritten", path)
		return
	}
	t.Errorf("%s is out of date with the code: run `make docs` and commit the result\n%s", path, firstDifference(page, want))
}

// Splice replaces the generated section name of page with text.
func Splice(page []byte, name, text string) ([]byte, error) {
	begin, end := []byte("<!-- generated:"+name+" -->\n"), []byte("<!-- /generated:"+name+" -->")
	i := bytes.Index(page, begin)
	if i < 0 {
		return nil, fmt.Errorf("no line %q marks where the generated section %s begins", bytes.TrimSpace(begin), name)
	}
	j := bytes.Index(page[i:], end)
	if j < 0 {
		return nil, fmt.Errorf("no line %q ends the generated section %s", end, name)
	}
	j += i
	if text != "" && text[len(text)-1] != '\n' {
		text += "\n"
	}
	out := make([]byte, 0, len(page)+len(text))
	out = append(out, page[:i+len(begin)]...)
	out = append(out, text...)
	return append(out, page[j:]...), nil
}

// firstDifference shows the first line where the page and its regeneration part.
func firstDifference(have, want []byte) string {
	h, w := bytes.Split(have, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(h) || i < len(w); i++ {
		var hl, wl []byte
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(hl, wl) {
			return fmt.Sprintf("line %d:\n  page: %s\n  code: %s", i+1, hl, wl)
		}
	}
	return ""
}
