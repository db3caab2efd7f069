package guard

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// FuzzAnalyze: Analyze must never panic, never accept a line containing a
// substitution sequence, and whatever it accepts must rebuild into a line
// that is accepted again with the same executables.
func FuzzAnalyze(f *testing.F) {
	for _, c := range corpus {
		f.Add(c.cmd)
	}
	for _, s := range []string{
		"echo \"$(id)\"", "echo '`id`'", "cat <(ls)", "tee >(sh)", "env -S 'sh -c \"id\"'", "bash -lc 'id | wc -l'",
		"cat <<'EOF'\nx\nEOF", "a=1 b", "ls\\\n-la", "$'\\x41'", "sudo -u x env -i bash -c 'ls'", "cd / && ls",
	} {
		f.Add(s)
	}
	env := AnalyzeEnv{Path: "/usr/local/bin:/usr/bin:/bin", Cwd: "/"}
	pol := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Workspace: "/tmp", Allowlist: []Entry{{ID: "x", Pattern: "/usr/bin/*"}}}
	f.Fuzz(func(t *testing.T, cmd string) {
		a := Analyze(cmd, env)
		_ = a.Explain()
		v := pol.Evaluate(a)
		_ = pol.Fallback(a)
		_ = PersistablePaths(a)
		if !a.OK {
			if a.Rule == "" || a.Reason == "" {
				t.Fatalf("refused without a rule: %q", cmd)
			}
			if v.Decision == vocab.DecisionRun {
				t.Fatalf("allowlist policy runs a refused analysis: %q", cmd)
			}
			return
		}
		for _, s := range []string{"$(", "`", "<(", ">("} {
			if strings.Contains(cmd, s) {
				t.Fatalf("accepted a line containing %q: %q", s, cmd)
			}
		}
		if a.Rebuilt == "" || len(a.Segments) == 0 {
			t.Fatalf("accepted without rebuilt command or segments: %q", cmd)
		}
		var paths []string
		for _, s := range a.Segments {
			if !s.OK() {
				t.Fatalf("accepted with a refused segment: %q", cmd)
			}
			if !s.Builtin && (!strings.HasPrefix(s.Resolved, "/") || !strings.HasPrefix(s.Path, "/")) {
				t.Fatalf("accepted with an unresolved executable %+v: %q", s, cmd)
			}
			paths = append(paths, s.Resolved)
		}
		b := Analyze(a.Rebuilt, env)
		if !b.OK {
			t.Fatalf("rebuilt line refused (%s)\noriginal: %q\nrebuilt:  %q", b.Reason, cmd, a.Rebuilt)
		}
		var again []string
		for _, s := range b.Segments {
			again = append(again, s.Resolved)
		}
		if !slices.Equal(paths, again) {
			t.Fatalf("rebuilt line runs %v, original %v: %q", again, paths, cmd)
		}
	})
}
