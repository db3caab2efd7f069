package sessions

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestNewID(t *testing.T) {
	slug := regexp.MustCompile(`^[a-z]+-[a-z]+$`)
	id := newID(func(string) bool { return false })
	if !slug.MatchString(id) {
		t.Fatalf("id %q is not adjective-noun", id)
	}
	// The first k candidates are taken: the base, then -2..-12, then a
	// random suffix.
	for k := 0; k <= 13; k++ {
		var tried []string
		id := newID(func(s string) bool { tried = append(tried, s); return len(tried) <= k })
		base := tried[0]
		var want *regexp.Regexp
		switch {
		case k == 0:
			want = regexp.MustCompile("^" + base + "$")
		case k <= 11:
			want = regexp.MustCompile(fmt.Sprintf("^%s-%d$", base, k+1))
		default:
			want = regexp.MustCompile("^" + base + "-[0-9a-f]{6}$")
		}
		if !want.MatchString(id) {
			t.Fatalf("%d taken: id %q, want %s", k, id, want)
		}
	}
}

func TestDeriveName(t *testing.T) {
	tests := []struct{ cmd, want string }{
		{"ls", "ls"},
		{"npm run build", "npm run"},
		{"git -C /repo status", "git /repo"},
		{"/usr/bin/python3 -u server.py --port 8080", "python3 server.py"},
		{"FOO=1 BAR=2 make -j4 all", "make all"},
		{`grep -r "needle" .`, "grep needle"},
		{"  tail   -f   /var/log/syslog  ", "tail /var/log/syslog"},
		{"echo " + strings.Repeat("a", 100), "echo aaaaaaaaaaaaaaaaaa…aaaaaaaaaaaaaaaaaaaaaaaa"},
	}
	for _, tt := range tests {
		got := deriveName(tt.cmd)
		if got != tt.want {
			t.Errorf("deriveName(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
		if n := len([]rune(got)); n > 48 {
			t.Errorf("deriveName(%q) has %d runes", tt.cmd, n)
		}
	}
}

func TestScopeKey(t *testing.T) {
	// Every pair is its own scope: no two of these may share one.
	pairs := [][2]string{
		{"", ""}, {"a", ""}, {"", "a"}, {"a", "s"}, {"b", "s"}, {"", "s"},
		{`a"/"`, ""}, {"a", `"/"`}, {"a/", "s"}, {"a", "/s"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := scopeKey(p[0], p[1])
		if q, dup := seen[k]; dup {
			t.Errorf("(agent %q, key %q) and (agent %q, key %q) share scope %q", p[0], p[1], q[0], q[1], k)
		}
		seen[k] = p
		if scopeKey(p[0], p[1]) != k {
			t.Errorf("scopeKey(%q,%q) is not stable", p[0], p[1])
		}
	}
}
