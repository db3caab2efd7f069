package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

func TestParseUIDRange(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		slots   uint32
	}{
		{"", "", 500000},
		{"3000000000-3000000009", "", 5},
		{"100-101", "", 1},
		{"0-10", "0 (root)", 0},
		{"10-10", "LAST must be above FIRST", 0},
		{"65530-65540", "65534", 0},
		{"4294967290-4294967295", "no id", 0},
		{"abc", "FIRST-LAST", 0},
		{"5-x", "between 1 and", 0},
	} {
		r, err := sandboxconfig.ParseUIDRange(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidConfig)):
			t.Errorf("%q: want an error with %q, got %v", tc.in, tc.err, err)
		case tc.err == "" && r.Slots() != tc.slots:
			t.Errorf("%q: %d slots, want %d", tc.in, r.Slots(), tc.slots)
		}
	}
}

// TestSecurityIdentityRangeHostOverlap: a range that meets a host
// account, group or subordinate id range is refused at start, naming the
// file and line.
func TestSecurityIdentityRangeHostOverlap(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := hostIDFiles{
		Passwd: write("passwd", "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n"),
		Group:  write("group", "root:x:0:\nbig:x:2000000100:\n"),
		Subuid: write("subuid", "alice:100000:65536\n"),
		Subgid: write("subgid", "alice:3000000000:65536\n"),
	}
	for _, tc := range []struct{ rng, want string }{
		{"1000-1001", "passwd line 2"},
		{"2000000000-2000000199", "group line 2"},
		{"165535-165540", "subuid line 1"},
		{"3000065535-3000065600", "subgid line 1"},
		{"2000000200-2000999999", ""},
		{"165536-170000", ""},
	} {
		cfg := DefaultConfig()
		cfg.Identity.UIDRange = tc.rng
		ids, err := newIdentities(cfg, 0, files)
		if tc.want == "" {
			if err != nil || ids == nil {
				t.Errorf("%s: %v", tc.rng, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: want a refusal naming %q, got %v", tc.rng, tc.want, err)
		}
	}
	// Not root, or a configured user: no identities, nothing checked.
	cfg := DefaultConfig()
	cfg.Identity.UIDRange = "1000-1001"
	if ids, err := newIdentities(cfg, 1000, files); ids != nil || err != nil {
		t.Errorf("non-root daemon: %v %v", ids, err)
	}
	cfg.Docker.User = "1000:1000"
	if ids, err := newIdentities(cfg, 0, files); ids != nil || err != nil {
		t.Errorf("configured user: %v %v", ids, err)
	}
}

// TestSecurityIdentityRangeRefusedAtStart: a daemon (root) whose range
// holds a uid of this host's /etc/passwd does not start.
func TestSecurityIdentityRangeRefusedAtStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("identities are in force only for a root daemon")
	}
	cfg := DefaultConfig()
	cfg.Identity.UIDRange = "0-1" // refused by the parser
	if _, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir()}); err == nil || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("range with root: %v", err)
	}
	cfg.Identity.UIDRange = "1-100" // daemon, bin, sys... of /etc/passwd
	_, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "/etc/passwd line") {
		t.Fatalf("range over system accounts: %v", err)
	}
}
