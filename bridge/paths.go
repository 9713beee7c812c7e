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
	if strings.ContainsRune(p, '%') {
		// Paths are sent escaped, so a literal % is fine, but an encoded separator or dot is a
		// traversal attempt in disguise.
		if dec, err := url.PathUnescape(p); err == nil && dec != p {
			lower := strings.ToLower(p)
			for _, bad := range []string{"%2e", "%2f", "%5c", "%00"} {
				if strings.Contains(lower, bad) {
					return "", fmt.Errorf("%w %q: encoded separators or dots are not allowed", ErrBadPath, orig)
				}
			}
		}
	}
	for _, r := range p {
		if r == 0 || (unicode.IsControl(r) && r != '\t') {
			return "", fmt.Errorf("%w %q: control characters are not allowed", ErrBadPath, orig)
		}
		if r == '\\' {
			return "", fmt.Errorf("%w %q: use / as the separator", ErrBadPath, orig)
		}
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("%w %q: paths are relative to the Jupyter root", ErrBadPath, orig)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w %q: \"..\" is not allowed", ErrBadPath, orig)
		}
	}
	p = path.Clean("/" + p)[1:]
	if p == "" {
		return "", nil
	}
	return p, nil
}
