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
	tests := []struct{ agent, key, want string }{
		{"", "", ""},
		{"a", "", "a:a"},
		{"a", "s", "s:s"},
		{"", "s", "s:s"},
		{"x", "", "a:x"},
	}
	for _, tt := range tests {
		if got := scopeKey(tt.agent, tt.key); got != tt.want {
			t.Errorf("scopeKey(%q,%q) = %q, want %q", tt.agent, tt.key, got, tt.want)
		}
	}
	if scopeKey("x", "") == scopeKey("", "x") {
		t.Fatal("agentId x and sessionKey x share a scope")
	}
}
