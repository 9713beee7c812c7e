package bridge

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode"
)

// ErrBadPath is wrapped by every path rejected by CleanPath.
var ErrBadPath = errors.New("bridge: invalid document path")

// CleanPath normalises a document path relative to the Jupyter root and refuses anything that
// could leave it: absolute paths, "..", NUL and control characters, backslashes, and
// percent-encoded variants of those. It runs before any request leaves the sidecar.
func CleanPath(p string) (string, error) {
	orig := p
	// Paths are sent escaped, so a literal % is fine, but an encoded separator or dot is a
	// traversal attempt in disguise, at any depth of encoding (a proxy may decode twice).
	for level, cur := 0, p; level < 4 && strings.ContainsRune(cur, '%'); level++ {
		lower := strings.ToLower(cur)
		for _, bad := range []string{"%2e", "%2f", "%5c", "%00"} {
			if strings.Contains(lower, bad) {
				return "", fmt.Errorf("%w %q: encoded separators or dots are not allowed", ErrBadPath, orig)
			}
		}
		dec, err := url.PathUnescape(cur)
		if err != nil || dec == cur {
			break
		}
		cur = dec
	}
	for _, r := range p {
		if r == 0 || (unicode.IsControl(r) && r != '\t') {
			return "", fmt.Errorf("%w %q: control characters are not allowed", ErrBadPath, orig)
		}
		if r == '\\' || lookalikeSeparator(r) {
			return "", fmt.Errorf("%w %q: use / as the separator", ErrBadPath, orig)
		}
		if bidiControl(r) {
			return "", fmt.Errorf("%w %q: bidirectional control characters are not allowed (they disguise names)", ErrBadPath, orig)
		}
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("%w %q: paths are relative to the Jupyter root", ErrBadPath, orig)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || strings.Map(foldDot, seg) == ".." { // also "．．": NFKC (some filesystems, some tools) makes it ".."
			return "", fmt.Errorf("%w %q: \"..\" is not allowed", ErrBadPath, orig)
		}
	}
	p = path.Clean("/" + p)[1:]
	if p == "" {
		return "", nil
	}
	return p, nil
}

// lookalikeSeparator reports characters that render as or normalise (NFKC) to a slash or a
// backslash: a path showing "a∕..∕b" must not reach a tool that normalises it.
func lookalikeSeparator(r rune) bool {
	switch r {
	case '\u2215', '\u2044', '\uFF0F', '\u29F8', '\uFF3C', '\uFE68', '\u29F9':
		return true
	}
	return false
}

// foldDot maps characters that normalise to a full stop onto ".".
func foldDot(r rune) rune {
	switch r {
	case '\uFF0E', '\uFE52', '\u2024':
		return '.'
	}
	return r
}

func bidiControl(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069') || r == '\u200E' || r == '\u200F'
}
