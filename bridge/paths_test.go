package bridge

import (
	"errors"
	"testing"
)

func TestCleanPathRefusesTraversal(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"dot-dot", "../etc/passwd"},
		{"dot-dot inside", "a/../../etc/passwd"},
		{"dot-dot at end", "a/.."},
		{"absolute", "/etc/passwd"},
		{"home", "~/secrets.ipynb"},
		{"NUL", "a.ipynb\x00.txt"},
		{"control", "a\x1b[31m.ipynb"},
		{"backslash", `..\windows\win.ini`},
		{"encoded dots", "%2e%2e/etc/passwd"},
		{"encoded dots upper", "%2E%2E/etc/passwd"},
		{"encoded slash", "a%2f..%2fb"},
		{"encoded backslash", "a%5c..%5cb"},
		{"encoded NUL", "a.ipynb%00"},
		{"double-encoded dots", "%252e%252e/etc"}, // a proxy that decodes twice would see ".."
		{"fullwidth dots", "\uff0e\uff0e/etc/passwd"},
		{"one-dot leaders", "\u2024\u2024/etc"},
		{"division slash", "a\u2215..\u2215b"},
		{"fullwidth solidus", "a\uff0f..\uff0fb"},
		{"fullwidth backslash", "a\uff3c..\uff3cb"},
		{"right-to-left override", "report\u202eblyp.ipynb"},
		{"newline", "a\n.ipynb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CleanPath(tc.in)
			if err == nil {
				t.Fatalf("accepted %q as %q", tc.in, got)
			}
			if !errors.Is(err, ErrBadPath) {
				t.Errorf("error %v does not wrap ErrBadPath", err)
			}
		})
	}
}

func TestCleanPathKeepsOrdinaryNames(t *testing.T) {
	for in, want := range map[string]string{
		"notebook.ipynb":          "notebook.ipynb",
		"./a/./b.ipynb":           "a/b.ipynb",
		"a//b.ipynb":              "a/b.ipynb",
		"dir/":                    "dir",
		"":                        "",
		"..hidden/x.ipynb":        "..hidden/x.ipynb",
		"résumé ünïcode 数据.ipynb": "résumé ünïcode 数据.ipynb",
		"100% done.ipynb":         "100% done.ipynb",
		"a%20b.ipynb":             "a%20b.ipynb",
		"v1.2..3.ipynb":           "v1.2..3.ipynb",
		"emoji 👩‍💻 notes.md":      "emoji 👩‍💻 notes.md",
	} {
		got, err := CleanPath(in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
