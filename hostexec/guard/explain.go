package guard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxctl/sandboxctl/internal/shellword"
)

// Explain describes the analysis for a human approving the command: every
// segment that would really run (after wrappers), its resolved executable,
// the wrappers it goes through, and the rule that refused it, then the exact
// command that would be executed. Nothing is truncated.
func (a Analysis) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "command: %s\n", a.Command)
	if a.OK {
		b.WriteString("analysis: ok\n")
	} else {
		fmt.Fprintf(&b, "analysis: REFUSED (%s) %s\n", a.Rule, a.Reason)
	}
	for _, s := range a.Segments {
		fmt.Fprintf(&b, "segment %d: %s\n", s.Index, s.Raw)
		if len(s.Argv) > 0 {
			q := make([]string, len(s.Argv))
			for i, w := range s.Argv {
				q[i] = explainWord(w)
			}
			fmt.Fprintf(&b, "  argv: %s\n", strings.Join(q, " "))
		}
		switch {
		case s.Builtin:
			b.WriteString("  runs: shell builtin cd\n")
		case s.Resolved != "":
			fmt.Fprintf(&b, "  runs: %s", s.Resolved)
			if s.Path != s.Resolved {
				fmt.Fprintf(&b, " (found as %s)", s.Path)
			}
			b.WriteString("\n")
		}
		for _, w := range s.Wrappers {
			where := w.Resolved
			if where == "" {
				where = "shell builtin"
			}
			fmt.Fprintf(&b, "  via %s: %s [%s]\n", w.Kind, strings.Join(w.Argv, " "), where)
		}
		if len(s.Env) > 0 {
			keys := make([]string, 0, len(s.Env))
			for k := range s.Env {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "  env: %s=%s\n", k, s.Env[k])
			}
		}
		if s.ClearEnv {
			b.WriteString("  env: cleared (env -i)\n")
		}
		for _, r := range s.Redirects {
			fmt.Fprintf(&b, "  redirect: %s\n", r)
		}
		if len(s.Cwds) > 1 {
			fmt.Fprintf(&b, "  cwd: one of %s\n", strings.Join(s.Cwds, ", "))
		}
		if !s.OK() {
			fmt.Fprintf(&b, "  REFUSED %s: %s\n", s.Rule, s.Detail)
		}
	}
	if a.OK {
		fmt.Fprintf(&b, "will execute: %s\n", a.Rebuilt)
	}
	return b.String()
}

// explainWord shows one argv word to a human: shell-quoted
// (shellword.Quote), or, for a word with no POSIX shell form, as a Go-quoted
// escape marked as such so that nothing invisible reaches the reader.
func explainWord(w string) string {
	if q, err := shellword.Quote(w); err == nil {
		return q
	}
	return "<unquotable " + strconv.Quote(w) + ">"
}
