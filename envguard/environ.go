package envguard

import (
	"path/filepath"
	"strings"
)

// SanitizeInherited filters an os.Environ()-style list before it is handed to
// a process on the gateway or a node: entries without '=', entries whose key
// is invalid (including Windows' "=C:" entries) and entries whose key is
// blocked everywhere (exact or prefix, case ignored) are dropped. Order and
// duplicates are kept; Merge settles duplicates. The Pinned variables
// (LESSSECURE=1, PAGER=/bin/cat, EDITOR/VISUAL/GIT_EDITOR=/bin/false) are
// then appended, replacing any inherited value, so every host
// command starts with them.
//
// The result is never nil: a nil exec.Cmd.Env means "inherit everything",
// which is exactly what this function exists to prevent.
func SanitizeInherited(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		key, _, ok := strings.Cut(kv, "=")
		if !ok || IsBlockedEverywhere(key) {
			continue
		}
		if IsPinned(key) {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range sortedKeys(pinned) {
		out = append(out, k+"="+pinned[k])
	}
	return out
}

// Merge applies overrides to base, a KEY=VALUE list, and returns a new list:
// each key appears once, at the position of its first occurrence in base,
// with the override's value if there is one and otherwise the value of its
// last occurrence in base (as a process would see it); keys only in
// overrides are appended in sorted order. Malformed base entries (no '=')
// are dropped. Merge does not check keys: run CheckRequest on overrides
// first. The result is never nil.
func Merge(base []string, overrides map[string]string) []string {
	out := make([]string, 0, len(base)+len(overrides))
	index := make(map[string]int, len(base))
	for _, kv := range base {
		key, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if i, seen := index[key]; seen {
			out[i] = kv
			continue
		}
		index[key] = len(out)
		out = append(out, kv)
	}
	for _, k := range sortedKeys(overrides) {
		kv := k + "=" + overrides[k]
		if i, seen := index[k]; seen {
			out[i] = kv
			continue
		}
		out = append(out, kv)
	}
	return out
}

// BuildPath builds PATH for a gateway or node process: the prepend entries
// first, then the login shell's PATH entries, each once (first occurrence
// wins, compared after filepath.Clean). Empty and relative entries are
// dropped: both make command lookup depend on the working directory, which
// an agent controls. If nothing is left, DefaultSandboxPath is returned so a
// failed login-shell probe never yields an empty PATH.
func BuildPath(loginShellPath string, prepend []string) string {
	seen := make(map[string]bool)
	var entries []string
	add := func(e string) {
		if e == "" || !filepath.IsAbs(e) {
			return
		}
		e = filepath.Clean(e)
		if seen[e] {
			return
		}
		seen[e] = true
		entries = append(entries, e)
	}
	for _, e := range prepend {
		// A prepend entry may itself be a PATH-style list.
		for _, part := range filepath.SplitList(e) {
			add(part)
		}
	}
	for _, e := range filepath.SplitList(loginShellPath) {
		add(e)
	}
	if len(entries) == 0 {
		return DefaultSandboxPath
	}
	return strings.Join(entries, string(filepath.ListSeparator))
}

// FilterShellWrapperEnv keeps only the terminal and locale keys (TERM, LANG,
// LC_*, COLORTERM, NO_COLOR, FORCE_COLOR) of a request env. A node uses it
// when a command runs through a shell wrapper, where any other key could
// change what the wrapper runs. Matching is exact (case-sensitive) and keys
// must be valid; the result is a new, never nil map.
func FilterShellWrapperEnv(env map[string]string) map[string]string {
	out := make(map[string]string)
	for k, v := range env {
		if !validKey(k) {
			continue
		}
		if shellWrapperKeys[k] || (strings.HasPrefix(k, shellWrapperLocalePrefix) && len(k) > len(shellWrapperLocalePrefix)) {
			out[k] = v
		}
	}
	return out
}
