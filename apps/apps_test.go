package apps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// sourcesHash is the hash build.mjs records (see its header): SHA-256 over "<path>\n<hex sha256
// of the file>\n" for package.json, package-lock.json, build.mjs and every file under src/, in
// byte order of their slash-separated paths.
func sourcesHash(dir string) (string, error) {
	files := []string{"package.json", "package-lock.json", "build.mjs"}
	err := filepath.WalkDir(filepath.Join(dir, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s\n%s\n", f, hex.EncodeToString(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type manifest struct {
	Sources string            `json:"sources"`
	Bundler string            `json:"bundler"`
	Files   map[string]string `json:"files"`
}

// The committed bundle is the one its sources make: the sources' hash it records is theirs, and
// the files are the ones the build wrote (nobody edited them by hand).
func TestBundleMatchesSources(t *testing.T) {
	b, err := dist.ReadFile("dist/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("dist/manifest.json: %v", err)
	}
	want, err := sourcesHash("web")
	if err != nil {
		t.Fatal(err)
	}
	if m.Sources != want {
		t.Errorf("apps/dist was built from other sources than apps/web holds (manifest %s, sources %s): run `make apps` and commit apps/dist", m.Sources, want)
	}
	if len(m.Files) != 2 {
		t.Errorf("manifest names %d files, want apps.js and apps.css", len(m.Files))
	}
	for name, hash := range m.Files {
		b, err := dist.ReadFile("dist/" + name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != hash {
			t.Errorf("dist/%s differs from what the build wrote (sha256 %s, manifest %s): run `make apps`", name, got, hash)
		}
		if !strings.Contains(string(b[:min(len(b), 300)]), "sources sha256 "+want) {
			t.Errorf("dist/%s does not name the sources' hash in its banner", name)
		}
	}
	if !strings.HasPrefix(m.Bundler, "esbuild ") {
		t.Errorf("bundler %q", m.Bundler)
	}
	lock, err := os.ReadFile("web/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimPrefix(m.Bundler, "esbuild "); !strings.Contains(string(lock), `"node_modules/esbuild": {`+"\n      \"version\": \""+v+`"`) {
		t.Errorf("the bundle was made by %s, not the esbuild package-lock.json pins", m.Bundler)
	}
}

// Every app is one self-contained document: no script, style, image or frame from elsewhere.
// (That it fetches nothing when it runs is what the browser test checks: integration/apps.)
func TestAppsAreSelfContained(t *testing.T) {
	outside := regexp.MustCompile(`(?i)<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?(https?:)?//|\bimportScripts\(`)
	css, err := dist.ReadFile("dist/apps.css")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)@import|url\(`).Find(css); m != nil {
		t.Errorf("apps.css loads something: %q", m)
	}
	for _, a := range List() {
		page, err := a.HTML()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(page, "<!doctype html>") || !strings.Contains(page, `data-app="`+a.Name+`"`) {
			t.Errorf("%s: not an HTML5 document naming its view:\n%.200s", a.Name, page)
		}
		if strings.Count(strings.ToLower(page), "<script") != 1 || strings.Count(strings.ToLower(page), "</script") != 1 {
			t.Errorf("%s: want exactly the one inline script", a.Name)
		}
		if m := outside.FindString(page); m != "" {
			t.Errorf("%s: refers to something outside the document: %q", a.Name, m)
		}
		if !strings.HasPrefix(a.URI, "ui://") {
			t.Errorf("%s: URI %q is not ui://", a.Name, a.URI)
		}
	}
}
