package main

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/gendoc"
)

// docs/configuration.md's table of options is generated from options(), the table that also
// drives the flags, the environment and --help. `make docs` (go test -run TestGeneratedDocs
// -update ./cmd/jupyter-collab-mcp/) rewrites it; without -update the test fails when the page
// differs from the code.

var updateDocs = flag.Bool("update", false, "rewrite the generated sections of docs/configuration.md")

func TestGeneratedDocs(t *testing.T) {
	gendoc.Check(t, "../../docs/configuration.md", map[string]string{"options": optionsDoc()}, *updateDocs)
}

// optionsDoc is the options as a table: flag, environment variable, default, meaning.
func optionsDoc() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	code := func(s string) string {
		if s == "" {
			return "—"
		}
		return "`" + s + "`"
	}
	for _, o := range options() {
		name := ""
		if o.flag != "" {
			name = "--" + o.flag
		}
		def := o.def
		if o.secret {
			def = ""
		}
		help := strings.ReplaceAll(o.help, "|", `\|`)
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(name), code(o.env), code(def), help)
	}
	return b.String()
}
