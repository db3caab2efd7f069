package nodeexec

import "testing"

func TestPeelShell(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		ok         bool
	}{
		{"/bin/sh -c 'echo hi; id'", "echo hi; id", true},
		{`'/bin/sh' '-c' 'it'"'"'s'`, "it's", true},
		{`/bin/sh -c "a$b"`, "", false},
		{"/bin/sh -c \"a`id`\"", "", false},
		{"'/bin/sh' '-c' 'a b'", "a b", true},
		{`'/bin/sh' '-c' ''\''/usr/bin/true'\'''`, "'/usr/bin/true'", true},
		{`/bin/sh -c a\ b\*`, "a b*", true},
		{`/bin/sh -c a*`, "", false},
		{`/bin/sh -c ~`, "", false},
		{`/bin/sh -c x\`, "", false},
		{"/bin/sh -lc x", "", false},
		{"/bin/sh -c x y", "", false},
		{"/bin/sh -c x; id", "", false},
		{"/bin/sh -c $X", "", false},
		{"FOO=1 /bin/sh -c x", "", false},
		{"/bin/sh -c x >/dev/null", "", false},
		{"/usr/bin/env -c x", "", false},
		{"sh -c x", "", false},
	} {
		got, ok := peelShell(tc.line, "/bin/sh")
		if ok != tc.ok || (ok && got != tc.want) || (!ok && got != tc.line) {
			t.Errorf("peelShell(%q) = %q, %v", tc.line, got, ok)
		}
	}
}
