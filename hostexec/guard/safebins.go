package guard

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotSafe is wrapped by every safe-bin profile refusal.
var ErrNotSafe = errors.New("not a safe use of a safe bin")

// SafeBinProfile says which arguments keep a stdin filter a pure filter:
// no file paths (bounded positionals), only known flags, no denied flags.
// Long options are resolved against Long (the program's complete long
// option list) with GNU prefix rules: a prefix of a denied option is denied
// (sort --compress-prog), an abbreviation of an allowed one is refused (the
// real program may know more options than we do), an unknown one is refused.
type SafeBinProfile struct {
	// Never, when set, refuses the bin as a safe bin whatever its arguments.
	Never string
	// MaxPositional bounds non-option arguments (patterns, tr sets).
	MaxPositional int
	// ShortBool and ShortValue are the accepted short flags; ShortValue ones
	// take a value (attached or next argument).
	ShortBool, ShortValue string
	// DeniedShort are refused short flags.
	DeniedShort string
	// Long maps every long option of the program to its kind: "bool",
	// "value" (takes a value), "optional" (only --opt or --opt=value) or
	// "deny".
	Long map[string]string
	// PatternFlags are flags that supply the pattern positional (grep -e):
	// when used, one fewer positional is allowed.
	PatternFlags []string
	// Numeric accepts -NUM (head -5).
	Numeric bool
}

// DefaultSafeBins is OpenClaw's default list.
func DefaultSafeBins() []string { return []string{"cut", "uniq", "head", "tail", "tr", "wc"} }

func longs(kind string, names ...string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		m["--"+n] = kind
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// DefaultSafeBinProfiles returns the built-in profiles: the default safe
// bins plus grep and sort (usable when listed in Policy.SafeBins) and jq,
// which always fails closed.
func DefaultSafeBinProfiles() map[string]SafeBinProfile {
	std := longs("deny", "help", "version")
	return map[string]SafeBinProfile{
		"head": {ShortBool: "qvz", ShortValue: "nc", Numeric: true, Long: merge(std,
			longs("value", "bytes", "lines"), longs("bool", "quiet", "silent", "verbose", "zero-terminated"))},
		"tail": {ShortBool: "qvz", ShortValue: "nc", DeniedShort: "fFs", Long: merge(std,
			longs("value", "bytes", "lines"), longs("bool", "quiet", "silent", "verbose", "zero-terminated"),
			longs("deny", "follow", "retry", "pid", "sleep-interval", "max-unchanged-stats", "debug"))},
		"cut": {ShortBool: "nsz", ShortValue: "bcdf", Long: merge(std,
			longs("value", "bytes", "characters", "delimiter", "fields", "output-delimiter"),
			longs("bool", "complement", "only-delimited", "zero-terminated"))},
		"uniq": {ShortBool: "cdDiuz", ShortValue: "fsw", Long: merge(std,
			longs("value", "skip-fields", "skip-chars", "check-chars"),
			longs("bool", "count", "repeated", "ignore-case", "unique", "zero-terminated"),
			longs("optional", "all-repeated", "group"))},
		"tr": {MaxPositional: 2, ShortBool: "cCdst", Long: merge(std,
			longs("bool", "complement", "delete", "squeeze-repeats", "truncate-set1"))},
		"wc": {ShortBool: "cmlLw", Long: merge(std,
			longs("bool", "bytes", "chars", "lines", "max-line-length", "words"),
			longs("deny", "files0-from", "total", "debug"))},
		"grep": {MaxPositional: 1, ShortBool: "EFGPiywxzsvbnHhoqacTZUlL", ShortValue: "emABC", DeniedShort: "fdDrR",
			PatternFlags: []string{"-e", "--regexp"}, Long: merge(std,
				longs("bool", "extended-regexp", "fixed-strings", "basic-regexp", "perl-regexp", "ignore-case",
					"no-ignore-case", "word-regexp", "line-regexp", "null-data", "no-messages", "invert-match",
					"byte-offset", "line-number", "line-buffered", "with-filename", "no-filename", "only-matching",
					"quiet", "silent", "text", "count", "initial-tab", "null", "no-group-separator", "binary",
					"files-without-match", "files-with-matches"),
				longs("value", "regexp", "max-count", "before-context", "after-context", "context", "label", "group-separator", "binary-files"),
				longs("optional", "color", "colour"),
				longs("deny", "file", "recursive", "dereference-recursive", "directories", "devices", "include",
					"exclude", "exclude-from", "exclude-dir"))},
		"sort": {ShortBool: "bdfgiMhnRrVsuzcCm", ShortValue: "ktS", DeniedShort: "oT", Long: merge(std,
			longs("bool", "ignore-leading-blanks", "dictionary-order", "ignore-case", "general-numeric-sort",
				"ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort", "reverse",
				"version-sort", "stable", "unique", "zero-terminated", "debug", "merge"),
			longs("value", "sort", "key", "field-separator", "buffer-size", "parallel", "batch-size"),
			longs("optional", "check"),
			longs("deny", "compress-program", "output", "temporary-directory", "files0-from", "random-source"))},
		"jq": {Never: "jq reads files and the environment ($ENV, env, input_filename, $__loc__, -L/import modules); it is never a safe bin"},
	}
}

// CheckSafeBinArgs checks argv (argv[0] is the bin) against a profile.
func CheckSafeBinArgs(prof SafeBinProfile, argv []string) error {
	if prof.Never != "" {
		return fmt.Errorf("%s: %w", prof.Never, ErrNotSafe)
	}
	if prof.Long == nil && prof.ShortBool == "" && prof.ShortValue == "" && prof.MaxPositional == 0 && prof.DeniedShort == "" {
		return fmt.Errorf("empty profile: %w", ErrNotSafe)
	}
	known := make([]string, 0, len(prof.Long))
	for k := range prof.Long {
		known = append(known, k)
	}
	slices.Sort(known)
	refuse := func(format string, a ...any) error {
		return fmt.Errorf(format+": %w", append(a, ErrNotSafe)...)
	}
	pos, pattern, endOpts := 0, false, false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if endOpts || a == "-" || !strings.HasPrefix(a, "-") {
			pos++
			continue
		}
		if a == "--" {
			endOpts = true
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasVal := strings.Cut(a, "=")
			full, err := resolveLong(name, known)
			if err != nil {
				return refuse("%v", err)
			}
			kind := prof.Long[full]
			if kind == "deny" {
				if full != name {
					return refuse("denied flag %s (given as %s)", full, name)
				}
				return refuse("denied flag %s", full)
			}
			if full != name {
				return refuse("abbreviated long option %s (= %s): spell it out", name, full)
			}
			switch kind {
			case "bool":
				if hasVal {
					return refuse("%s takes no value", full)
				}
			case "value":
				if !hasVal {
					if i+1 >= len(argv) {
						return refuse("%s needs a value", full)
					}
					i++
				}
			case "optional":
			default:
				return refuse("unknown flag %s", full)
			}
			if slices.Contains(prof.PatternFlags, full) {
				pattern = true
			}
			continue
		}
		if prof.Numeric && strings.Trim(a[1:], "0123456789") == "" {
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			switch {
			case strings.IndexByte(prof.DeniedShort, c) >= 0:
				return refuse("denied flag -%c", c)
			case strings.IndexByte(prof.ShortBool, c) >= 0:
			case strings.IndexByte(prof.ShortValue, c) >= 0:
				if j+1 == len(a) {
					if i+1 >= len(argv) {
						return refuse("-%c needs a value", c)
					}
					i++
				}
				if slices.Contains(prof.PatternFlags, "-"+string(c)) {
					pattern = true
				}
				j = len(a)
			default:
				return refuse("unknown flag -%c", c)
			}
		}
	}
	max := prof.MaxPositional
	if pattern && max > 0 {
		max--
	}
	if pos > max {
		return refuse("%d positional argument(s), at most %d allowed (no file paths)", pos, max)
	}
	return nil
}

// safeBin reports whether seg runs a safe bin of p, and why not.
func (p Policy) safeBin(seg Segment) (bool, string) {
	if seg.Builtin || seg.Path == "" || len(seg.Argv) == 0 {
		return false, "not an executable"
	}
	name := filepath.Base(seg.Path)
	if !slices.Contains(p.safeBins(), name) {
		return false, "not a safe bin"
	}
	prof, ok := p.profiles()[name]
	if !ok {
		return false, fmt.Sprintf("safe bin %s has no profile", name)
	}
	trusted := p.trustedDirs()
	rbase := filepath.Base(seg.Resolved)
	if !inDirs(seg.Path, trusted) || !inDirs(seg.Resolved, trusted) || (rbase != name && rbase != "coreutils") {
		return false, fmt.Sprintf("%s resolves to %s, outside the trusted dirs %v", name, seg.Resolved, trusted)
	}
	if err := CheckSafeBinArgs(prof, seg.Argv); err != nil {
		return false, fmt.Sprintf("safe bin %s: %v", name, err)
	}
	return true, ""
}

func (p Policy) safeBins() []string {
	if p.SafeBins == nil {
		return DefaultSafeBins()
	}
	return p.SafeBins
}

func (p Policy) profiles() map[string]SafeBinProfile {
	if p.SafeBinProfiles == nil {
		return DefaultSafeBinProfiles()
	}
	return p.SafeBinProfiles
}

func (p Policy) trustedDirs() []string {
	if len(p.TrustedDirs) == 0 {
		return DefaultTrustedDirs()
	}
	return p.TrustedDirs
}
