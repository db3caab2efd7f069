package guard

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrBadPattern is wrapped by every allowlist pattern validation error.
var ErrBadPattern = errors.New("malformed allowlist pattern")

// Entry is one allowlist entry, as persisted in approvals.json.
type Entry struct {
	ID               string `json:"id"`
	Pattern          string `json:"pattern"`
	LastUsedAt       int64  `json:"lastUsedAt,omitempty"` // unix ms
	LastUsedCommand  string `json:"lastUsedCommand,omitempty"`
	LastResolvedPath string `json:"lastResolvedPath,omitempty"`
}

// ValidatePattern checks an allowlist pattern. A pattern is either an
// absolute path glob (`**` any characters, `*` any characters but `/`, `?`
// one character but `/`) or a bare executable name (optionally with `*`/`?`)
// matched against the executable's base name. Character classes, `~`,
// relative paths, `.`/`..` components, empty components and patterns that
// match every executable are refused.
func ValidatePattern(p string) error {
	bad := func(why string) error { return fmt.Errorf("%q: %s: %w", p, why, ErrBadPattern) }
	switch {
	case p == "":
		return bad("empty")
	case strings.TrimSpace(p) != p || strings.ContainsAny(p, " \t\n\r\x00"):
		return bad("contains whitespace or control characters")
	case strings.ContainsAny(p, "[]{}\\~$`"):
		return bad("only **, * and ? are supported (no [ ] { } \\ ~ $ `)")
	case strings.Contains(p, "***"):
		return bad("*** is not a valid glob")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("contains control characters")
		}
	}
	if !strings.Contains(p, "/") {
		if p == "*" || p == "**" || strings.Trim(p, "*?") == "" {
			return bad("matches every executable (use security full instead)")
		}
		if strings.Contains(p, "**") {
			return bad("** needs a path")
		}
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return bad("a pattern with / must be an absolute path")
	}
	for _, c := range strings.Split(p[1:], "/") {
		switch c {
		case "":
			return bad("empty path component")
		case ".", "..":
			return bad(". and .. are not allowed")
		}
	}
	if strings.Trim(p, "/*?") == "" {
		return bad("matches every executable (use security full instead)")
	}
	return nil
}

func compilePattern(p string) (*regexp.Regexp, error) {
	if err := ValidatePattern(p); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// MatchPattern reports whether an allowlist pattern matches an executable.
// path is where it was found on PATH and resolved its symlink-free form;
// path patterns match resolved only (a symlink in an allowlisted directory
// pointing elsewhere does not match), bare names match either base name.
// Matching is case-sensitive.
func MatchPattern(pattern, path, resolved string) (bool, error) {
	re, err := compilePattern(pattern)
	if err != nil {
		return false, err
	}
	if !strings.Contains(pattern, "/") {
		for _, p := range []string{path, resolved} {
			if p != "" && re.MatchString(filepath.Base(p)) {
				return true, nil
			}
		}
		return false, nil
	}
	return resolved != "" && re.MatchString(resolved), nil
}
