package guard

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
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

// ValidatePattern checks an allowlist pattern. A pattern is an executable
// part — an absolute path glob (`**` any characters, `*` any characters but
// `/`, `?` one character but `/`) or a bare executable name (optionally with
// `*`/`?`) matched against the executable's base name — optionally followed
// by a space and an argv pattern: the exact arguments, shell-quoted
// (`/usr/bin/git status`, `/usr/bin/git log '--format=%h %s'`). Character
// classes, `~`, relative paths, `.`/`..` components, empty components and
// executable parts that match every executable are refused; argument words
// must be literal (quoted where the shell would expand them).
func ValidatePattern(p string) error {
	_, _, err := ParsePattern(p)
	return err
}

// ParsePattern splits an allowlist pattern into its executable part and its
// argv pattern (nil when the pattern has none: every argv matches, except
// those carrying a gadget of the program, see Gadget).
func ParsePattern(p string) (string, []string, error) {
	bad := func(why string) error { return fmt.Errorf("%q: %s: %w", p, why, ErrBadPattern) }
	if p == "" {
		return "", nil, bad("empty")
	}
	if strings.TrimSpace(p) != p {
		return "", nil, bad("leading or trailing whitespace")
	}
	head, rest, hasArgs := strings.Cut(p, " ")
	if err := validateHead(head); err != nil {
		return "", nil, bad(err.Error())
	}
	if !hasArgs {
		return head, nil, nil
	}
	if strings.TrimLeft(rest, " \t") != rest {
		return "", nil, bad("one space between the executable and its arguments")
	}
	args, err := parseArgvPattern(rest)
	if err != nil {
		return "", nil, bad("argv pattern: " + err.Error())
	}
	return head, args, nil
}

// FormatArgvPattern is the allowlist pattern that matches exactly path with
// args (each argument quoted with syntax.Quote). ok is false when the
// arguments cannot be written so that ParsePattern reads them back
// unchanged (control characters, substitution sequences).
func FormatArgvPattern(path string, args []string) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	words := []string{path}
	for _, a := range args {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return "", false
		}
		words = append(words, q)
	}
	p := strings.Join(words, " ")
	head, got, err := ParsePattern(p)
	if err != nil || head != path || !slices.Equal(got, args) {
		return "", false
	}
	return p, true
}

// parseArgvPattern reads the argument words of a pattern with the shell
// parser: one simple command of literal words, nothing that expands.
func parseArgvPattern(s string) ([]string, error) {
	c, err := oneCall(s)
	if err != nil {
		return nil, err
	}
	if len(c.Assigns) > 0 || len(c.Args) == 0 {
		return nil, errors.New("must be one list of literal words (no operators, redirections or assignments)")
	}
	out := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		v, rule, msg := word(a)
		if rule != "" {
			return nil, fmt.Errorf("%s: %s", rule, msg)
		}
		out = append(out, v)
	}
	return out, nil
}

func validateHead(p string) error {
	bad := func(why string) error { return errors.New(why) }
	switch {
	case strings.ContainsAny(p, " \t\n\r\x00"):
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
	if err := validateHead(p); err != nil {
		return nil, fmt.Errorf("%q: %s: %w", p, err, ErrBadPattern)
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

// MatchPattern reports whether the executable part of an allowlist pattern
// matches an executable (the argv part, if any, is Policy's to compare).
// path is where it was found on PATH and resolved its symlink-free form;
// path patterns match resolved only (a symlink in an allowlisted directory
// pointing elsewhere does not match), bare names match either base name.
// Matching is case-sensitive. (Policy further restricts bare names to PATH
// hits in the trusted directories.)
func MatchPattern(pattern, path, resolved string) (bool, error) {
	pattern, _, err := ParsePattern(pattern)
	if err != nil {
		return false, err
	}
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
