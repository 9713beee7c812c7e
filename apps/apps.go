// Package apps holds the MCP Apps the sidecar serves as ui:// resources: three views of the live
// notebook for the person in the chat (the outputs of the cells a tool read or ran, the notebook
// following its room live, and a fork's changes with Accept and Reject). Their code lives in
// apps/web (the official SDK's App class, DOMPurify, marked), bundled by `make apps` with a pinned
// esbuild into dist/apps.js and dist/apps.css; both are committed, so `go build` needs no npm,
// and embedded here. dist/manifest.json records the hash of the sources they were built from
// and their own hashes: apps_test.go fails when either drifts.
//
// Each app's HTML is one self-contained document (the shared script and style inlined, no
// outside fetch): the host loads it in a sandboxed frame under the restrictive default CSP of
// MCP Apps. The apps get their data by calling the sidecar's tools through the host, never by
// any other way.
package apps

import (
	"embed"
	"fmt"
	"html"
	"strings"
)

//go:embed dist/apps.js dist/apps.css dist/manifest.json
var dist embed.FS

// MIMEType is the mime type of an MCP App's HTML (MCP Apps 2026-01-26).
const MIMEType = "text/html;profile=mcp-app"

// App is one view: its name (what the bundle's entry point switches on), its resource URI, and
// how a host lists it.
type App struct {
	Name        string
	URI         string
	Title       string
	Description string
}

// The apps.
var (
	Outputs = App{"outputs", "ui://jupyter/outputs", "Notebook outputs",
		"The outputs of the cells a tool read or ran, as JupyterLab shows them (images at full size, tables, markdown, errors, streams), read live from the notebook."}
	Notebook = App{"notebook", "ui://jupyter/notebook", "Live notebook",
		"A read-only view of a notebook that follows its room live: cells, runs, outputs arriving, who is where; with a link to open it in JupyterLab."}
	Suggestion = App{"suggestion", "ui://jupyter/suggestion", "Suggested changes",
		"A fork's changes cell by cell, with Accept and Reject for all of them or each cell (merge or discard through the host)."}
)

// List returns every app.
func List() []App { return []App{Outputs, Notebook, Suggestion} }

// HTML is an app's document: the shared bundle inlined, the app chosen by the root element's
// data-app attribute.
func (a App) HTML() (string, error) {
	js, err := dist.ReadFile("dist/apps.js")
	if err != nil {
		return "", fmt.Errorf("apps: %w", err)
	}
	css, err := dist.ReadFile("dist/apps.css")
	if err != nil {
		return "", fmt.Errorf("apps: %w", err)
	}
	// Inlined text must not close its element early (esbuild escapes "</script" in the bundle;
	// apps_test.go checks both).
	if strings.Contains(strings.ToLower(string(js)), "</script") || strings.Contains(strings.ToLower(string(css)), "</style") {
		return "", fmt.Errorf("apps: the bundle would close its element early")
	}
	var b strings.Builder
	b.Grow(len(js) + len(css) + 512)
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\" data-app=\"%s\"><head><meta charset=\"utf-8\">"+
		"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><meta name=\"color-scheme\" content=\"light dark\">"+
		"<title>%s</title><style>", html.EscapeString(a.Name), html.EscapeString(a.Title))
	b.Write(css)
	b.WriteString("</style></head><body><main id=\"app\"></main><script>")
	b.Write(js)
	b.WriteString("</script></body></html>\n")
	return b.String(), nil
}
