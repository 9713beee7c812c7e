package tools_test

import (
	"slices"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
)

// A tree with notebooks and text files at several depths, hidden entries and binaries.
func treeFiles() []bridgetest.File {
	nb := notebook(code("k1", "x = 1"), markdown("k2", "# T"))
	return []bridgetest.File{
		nbFile("a.ipynb", nb),
		dirFile("analysis"),
		nbFile("analysis/r1.ipynb", nb),
		dirFile("analysis/deep"),
		nbFile("analysis/deep/r2.ipynb", nb),
		nbFile("analysis_old.ipynb", nb),
		nbFile("b.ipynb", nb),
		dirFile(".hidden"),
		nbFile(".hidden/h.ipynb", nb),
		nbFile(".secret.ipynb", nb),
		textFile("README.md", "# readme\n"),
		textFile("notes.txt", "n\n"),
		dirFile("src"),
		textFile("src/a.py", "a = 1\n"),
		textFile("src/b.py", "b = 2\n"),
		textFile("src/notes.md", "notes\n"),
		dirFile("src/sub"),
		textFile("src/sub/c.py", "c = 3\n"),
		dirFile("img"),
		textFile("img/logo.png", "\x89PNG"),
		dirFile("docs"),
		textFile("docs/guide.md", "guide\n"),
		textFile("docs/data.PY", "upper\n"),
	}
}

func entryPaths(t *testing.T, body map[string]any, key string) []string {
	t.Helper()
	var out []string
	for _, x := range asList(t, body[key]) {
		out = append(out, str(asMap(t, x)["path"]))
	}
	if num(t, body["count"]) != len(out) {
		t.Errorf("count = %v for %d entries", body["count"], len(out))
	}
	return out
}

func TestListNotebooks(t *testing.T) {
	e := newEnv(t, treeFiles())
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a.ipynb", "analysis/deep/r2.ipynb", "analysis/r1.ipynb", "analysis_old.ipynb", "b.ipynb"}},
		{"analysis/", []string{"analysis/deep/r2.ipynb", "analysis/r1.ipynb"}},
		{"/analysis/", []string{"analysis/deep/r2.ipynb", "analysis/r1.ipynb"}},
		{"analysis/r", []string{"analysis/r1.ipynb"}},
		{"analysis/deep", []string{"analysis/deep/r2.ipynb"}},
		{"an", []string{"analysis/deep/r2.ipynb", "analysis/r1.ipynb", "analysis_old.ipynb"}},
		{"b", []string{"b.ipynb"}},
		{"zzz", nil},
	} {
		body := e.ok("list_notebooks", map[string]any{"path_prefix": tc.prefix})
		if got := entryPaths(t, body, "notebooks"); !slices.Equal(got, tc.want) {
			t.Errorf("path_prefix %q: %v, want %v", tc.prefix, got, tc.want)
		}
		if _, ok := body["truncated"]; ok {
			t.Errorf("path_prefix %q: truncated", tc.prefix)
		}
	}
	body := e.ok("list_notebooks", map[string]any{})
	for _, x := range asList(t, body["notebooks"]) {
		m := asMap(t, x)
		if m["open"] != false || str(m["last_modified"]) == "" {
			t.Errorf("entry %v", m)
		}
	}
}

// "Only notebooks whose path starts with this (a directory like "analysis/" or a name prefix)":
// a prefix that happens to name a directory still matches siblings that start with it.
func TestListNotebooksPrefixNamingADirectory(t *testing.T) {
	e := newEnv(t, treeFiles())
	got := entryPaths(t, e.ok("list_notebooks", map[string]any{"path_prefix": "analysis"}), "notebooks")
	want := []string{"analysis/deep/r2.ipynb", "analysis/r1.ipynb", "analysis_old.ipynb"}
	if !slices.Equal(got, want) {
		t.Errorf("BUG: list_notebooks path_prefix \"analysis\" returns %v, want %v: when the prefix names a directory, walk() starts in that directory and never lists its parent, so \"analysis_old.ipynb\" is missed (notebooks.go walk: start stays clean when Stat says directory, while match is still the bare prefix)", got, want)
	}
}

func TestListNotebooksMaxResultsAndOpenRooms(t *testing.T) {
	e := newEnv(t, treeFiles())
	body := e.ok("list_notebooks", map[string]any{"max_results": 2})
	if got := entryPaths(t, body, "notebooks"); !slices.Equal(got, []string{"a.ipynb", "analysis/deep/r2.ipynb"}) {
		t.Errorf("max_results 2: %v", got)
	}
	if body["truncated"] != true {
		t.Errorf("truncated = %v, want true", body["truncated"])
	}
	mustContain(t, "note", str(body["note"]), "2 of 5")
	body = e.ok("list_notebooks", map[string]any{"max_results": 5})
	if _, ok := body["truncated"]; ok {
		t.Errorf("exactly max_results entries reported truncated")
	}

	e.nbVersion("analysis/r1.ipynb")
	body = e.ok("list_notebooks", map[string]any{"path_prefix": "analysis/"})
	for _, x := range asList(t, body["notebooks"]) {
		m := asMap(t, x)
		switch m["path"] {
		case "analysis/r1.ipynb":
			if m["open"] != true || num(t, m["cell_count"]) != 2 {
				t.Errorf("open room entry = %v, want open with 2 cells", m)
			}
		default:
			if m["open"] != false {
				t.Errorf("entry %v is open", m)
			}
			if _, ok := m["cell_count"]; ok {
				t.Errorf("closed entry has a cell_count: %v", m)
			}
		}
	}
}

func TestListNotebooksRefusals(t *testing.T) {
	e := newEnv(t, treeFiles())
	r := e.fail("list_notebooks", map[string]any{"path_prefix": "nowhere/deeper/"})
	mustContain(t, "missing directory", findDetail(t, r, "path_prefix").msg, "nowhere")
	// A directory prefix (trailing slash) must exist; a name prefix nothing starts with is an
	// empty listing, not an error.
	r = e.fail("list_notebooks", map[string]any{"path_prefix": "nowhere/"})
	mustContain(t, "missing directory", findDetail(t, r, "path_prefix").msg, "nowhere")
	if got := entryPaths(t, e.ok("list_notebooks", map[string]any{"path_prefix": "nowhere"}), "notebooks"); len(got) != 0 {
		t.Errorf("nowhere: %v", got)
	}
	r = e.fail("list_notebooks", map[string]any{"path_prefix": "../"})
	findDetail(t, r, "path_prefix")
	r = e.fail("list_notebooks", map[string]any{"max_results": 0})
	findDetail(t, r, "max_results")
}

func TestListDocuments(t *testing.T) {
	e := newEnv(t, treeFiles())
	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{}, []string{"README.md", "docs/data.PY", "docs/guide.md", "notes.txt", "src/a.py", "src/b.py", "src/notes.md", "src/sub/c.py"}},
		{map[string]any{"path_filter": "src/"}, []string{"src/a.py", "src/b.py", "src/notes.md", "src/sub/c.py"}},
		{map[string]any{"path_filter": "src/*.py"}, []string{"src/a.py", "src/b.py"}},
		{map[string]any{"path_filter": "*.md"}, []string{"README.md", "docs/guide.md", "src/notes.md"}},
		{map[string]any{"path_filter": "src/sub/?.py"}, []string{"src/sub/c.py"}},
		{map[string]any{"path_filter": "[ab]*"}, []string{"src/a.py", "src/b.py"}}, // a glob without "/" matches base names
		{map[string]any{"path_filter": "src/[ab].py"}, []string{"src/a.py", "src/b.py"}},
		{map[string]any{"file_type": "py"}, []string{"docs/data.PY", "src/a.py", "src/b.py", "src/sub/c.py"}},
		{map[string]any{"file_type": ".md", "path_filter": "src/"}, []string{"src/notes.md"}},
		{map[string]any{"file_type": "png"}, nil},
		{map[string]any{"file_type": "ipynb"}, nil},
		{map[string]any{"path_filter": "no"}, []string{"notes.txt"}},
	} {
		body := e.ok("list_documents", tc.args)
		if got := entryPaths(t, body, "documents"); !slices.Equal(got, tc.want) {
			t.Errorf("list_documents %s: %v, want %v", compact(tc.args), got, tc.want)
		}
	}
	body := e.ok("list_documents", map[string]any{"max_results": 3})
	if got := entryPaths(t, body, "documents"); len(got) != 3 || body["truncated"] != true {
		t.Errorf("max_results 3: %v truncated=%v", got, body["truncated"])
	}
	mustContain(t, "note", str(body["note"]), "3 of 8")
	for _, x := range asList(t, body["documents"]) {
		m := asMap(t, x)
		if _, ok := m["size"]; !ok {
			t.Errorf("entry without size: %v", m)
		}
	}
	r := e.fail("list_documents", map[string]any{"path_filter": "src/[a"})
	findDetail(t, r, "path_filter")

	// An open room is flagged.
	e.ok("get_document", map[string]any{"path": "src/a.py"})
	body = e.ok("list_documents", map[string]any{"path_filter": "src/*.py"})
	for _, x := range asList(t, body["documents"]) {
		m := asMap(t, x)
		if (m["path"] == "src/a.py") != (m["open"] == true) {
			t.Errorf("entry %v: open flag wrong", m)
		}
	}
}

func TestCreateNotebookSession(t *testing.T) {
	e := newEnv(t, treeFiles())
	body := e.ok("create_notebook_session", map[string]any{"path": "a.ipynb"})
	if body["created"] != false || num(t, body["cell_count"]) != 2 || body["path"] != "a.ipynb" {
		t.Errorf("existing notebook session = %v", body)
	}
	for _, k := range []string{"room_id", "session_id", "file_id", "version"} {
		if str(body[k]) == "" {
			t.Errorf("session lacks %s: %v", k, body)
		}
	}
	if asMap(t, body["collaboration"])["status"] != "synced" {
		t.Errorf("collaboration = %v", body["collaboration"])
	}

	// Missing, without create_if_missing: refused, nothing created.
	r := e.fail("create_notebook_session", map[string]any{"path": "new/n.ipynb"})
	mustContain(t, "missing notebook", errorText(r), "create_if_missing")
	if _, err := e.srv.Stat(testutil.Context(t), "new/n.ipynb"); err == nil {
		t.Fatal("the notebook was created without create_if_missing")
	}
	if _, err := e.srv.Stat(testutil.Context(t), "new"); err == nil {
		t.Fatal("its directory was created without create_if_missing")
	}

	// With it, in directories that do not exist yet.
	body = e.ok("create_notebook_session", map[string]any{"path": "new/deeper/n.ipynb", "create_if_missing": true})
	if body["created"] != true || body["path"] != "new/deeper/n.ipynb" {
		t.Errorf("created session = %v", body)
	}
	for _, p := range []string{"new", "new/deeper"} {
		if fi, err := e.srv.Stat(testutil.Context(t), p); err != nil || fi.Type != "directory" {
			t.Errorf("%s: %v %v, want a directory", p, fi, err)
		}
	}
	if fi, err := e.srv.Stat(testutil.Context(t), "new/deeper/n.ipynb"); err != nil || fi.Type != "notebook" {
		t.Errorf("new notebook: %v %v", fi, err)
	}
	// It is usable at once.
	e.ok("batch_insert_notebook_cells", map[string]any{"path": "new/deeper/n.ipynb", "cells": []any{map[string]any{"content": "print(1)", "id": "first"}}})
	if ids := e.srv.CellIDs("new/deeper/n.ipynb"); !slices.Contains(ids, "first") {
		t.Errorf("cells of the new notebook: %v", ids)
	}
	nb := e.serverNotebook("new/deeper/n.ipynb")
	if nb.NBFormat != 4 {
		t.Errorf("nbformat %d", nb.NBFormat)
	}
	// Again: the same notebook, not created twice.
	body = e.ok("create_notebook_session", map[string]any{"path": "new/deeper/n.ipynb", "create_if_missing": true})
	if body["created"] != false {
		t.Errorf("second session created = %v", body["created"])
	}
	if ids := e.srv.CellIDs("new/deeper/n.ipynb"); !slices.Contains(ids, "first") {
		t.Errorf("the notebook was replaced: %v", ids)
	}

	// Not a notebook.
	r = e.fail("create_notebook_session", map[string]any{"path": "README.md", "create_if_missing": true})
	mustContain(t, "text file", errorText(r), "not a notebook")
	r = e.fail("create_notebook_session", map[string]any{"path": "src", "create_if_missing": true})
	mustContain(t, "directory", errorText(r), "directory")
	// A file in the way of a directory.
	r = e.fail("create_notebook_session", map[string]any{"path": "README.md/x.ipynb", "create_if_missing": true})
	mustContain(t, "file as directory", errorText(r), "README.md")
}

func TestCreateDocumentSession(t *testing.T) {
	e := newEnv(t, treeFiles())
	body := e.ok("create_document_session", map[string]any{"path": "src/a.py"})
	if body["created"] != false || num(t, body["length"]) != 6 || num(t, body["line_count"]) != 1 {
		t.Errorf("existing document session = %v", body)
	}
	for _, k := range []string{"room_id", "session_id", "file_id", "version"} {
		if str(body[k]) == "" {
			t.Errorf("session lacks %s: %v", k, body)
		}
	}
	body = e.ok("create_document_session", map[string]any{"path": "src/a.py", "file_type": ".PY"})
	if body["created"] != false {
		t.Errorf("file_type match: %v", body)
	}

	r := e.fail("create_document_session", map[string]any{"path": "todo/list.md"})
	mustContain(t, "missing document", errorText(r), "create_if_missing")
	if _, err := e.srv.Stat(testutil.Context(t), "todo"); err == nil {
		t.Fatal("created without create_if_missing")
	}

	body = e.ok("create_document_session", map[string]any{"path": "todo/later/list.md", "create_if_missing": true, "file_type": "md"})
	if body["created"] != true || num(t, body["length"]) != 0 || num(t, body["line_count"]) != 0 {
		t.Errorf("created document session = %v", body)
	}
	if fi, err := e.srv.Stat(testutil.Context(t), "todo/later"); err != nil || fi.Type != "directory" {
		t.Errorf("parent directory: %v %v", fi, err)
	}
	e.ok("batch_insert_text", map[string]any{"path": "todo/later/list.md", "operations": []any{map[string]any{"text": "- [ ] ✓ test\n", "position": -1}}})
	if got := e.serverText("todo/later/list.md"); got != "- [ ] ✓ test\n" {
		t.Errorf("new document text %q", got)
	}

	// Refusals, each on path and creating nothing.
	for _, args := range []map[string]any{
		{"path": "x.ipynb", "create_if_missing": true},
		{"path": "dir/X.IPYNB", "create_if_missing": true},
		{"path": "a.ipynb"},
		{"path": "notes.md", "file_type": "txt", "create_if_missing": true},
	} {
		r := e.fail("create_document_session", args)
		findDetail(t, r, "path")
	}
	for _, p := range []string{"x.ipynb", "dir", "notes.md"} {
		if _, err := e.srv.Stat(testutil.Context(t), p); err == nil {
			t.Errorf("%s was created by a refused call", p)
		}
	}
	r = e.fail("create_document_session", map[string]any{"path": "x.ipynb", "create_if_missing": true})
	mustContain(t, "notebook path", errorText(r), "create_notebook_session")
}

// A notebook is created only where a notebook can live: a path without the .ipynb extension
// would be written as nbformat JSON that Jupyter then serves as a plain file.
func TestCreateNotebookSessionRequiresNotebookExtension(t *testing.T) {
	e := newEnv(t, treeFiles())
	r := e.call("create_notebook_session", map[string]any{"path": "todo.md", "create_if_missing": true})
	if !r.IsError {
		t.Errorf("BUG: create_notebook_session creates a notebook at %q (no .ipynb extension): %s. create_document_session refuses .ipynb, but the notebook side has no matching check (notebooks.go createNotebookSession/openOrCreate); on a real jupyter-server the JSON is written, then served as type \"file\", so the room cannot open and a stray file is left", "todo.md", r.Texts[0])
	}
	checkFailureShape(t, "create_notebook_session", r)
	findDetail(t, r, "path")
	if _, err := e.srv.Stat(testutil.Context(t), "todo.md"); err == nil {
		t.Error("todo.md was created")
	}
}

func TestUnicodePaths(t *testing.T) {
	e := newEnv(t, []bridgetest.File{
		dirFile("my notes"),
		nbFile("my notes/Größe 100%.ipynb", notebook(code("u1", "π = 3.14"))),
		textFile("my notes/résumé.md", "ünïcode\n"),
	})
	body := e.ok("get_notebook", map[string]any{"format": "json", "path": "my notes/Größe 100%.ipynb"})
	if cells := cellsOf(t, body); len(cells) != 1 || cells[0]["source"] != "π = 3.14" {
		t.Errorf("cells %v", cells)
	}
	if got := entryPaths(t, e.ok("list_notebooks", map[string]any{"path_prefix": "my notes/G"}), "notebooks"); !slices.Equal(got, []string{"my notes/Größe 100%.ipynb"}) {
		t.Errorf("list %v", got)
	}
	e.ok("batch_insert_text", map[string]any{"path": "my notes/résumé.md", "operations": []any{map[string]any{"text": "→", "position": 1}}})
	if got := e.serverText("my notes/résumé.md"); got != "ü→nïcode\n" {
		t.Errorf("text %q", got)
	}
}

func TestListDocumentsPrefixNamingADirectory(t *testing.T) {
	e := newEnv(t, append(treeFiles(), textFile("src_old.py", "old\n")))
	got := entryPaths(t, e.ok("list_documents", map[string]any{"path_filter": "src"}), "documents")
	want := []string{"src/a.py", "src/b.py", "src/notes.md", "src/sub/c.py", "src_old.py"}
	if !slices.Equal(got, want) {
		t.Errorf("BUG: list_documents path_filter \"src\" returns %v, want %v (same walk() directory-prefix problem as list_notebooks)", got, want)
	}
}
