package workdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture builds, under a fresh temp dir:
//
//	base/ws/                 the agent workspace
//	base/ws/src/pkg/         a nested directory
//	base/ws/file.txt         a regular file
//	base/ws/in-link      ->  base/ws/src            (absolute, inside)
//	base/ws/rel-in       ->  src/pkg                (relative, inside)
//	base/ws/out-link     ->  base/outside           (absolute, outside)
//	base/ws/rel-out      ->  ../outside             (relative, outside)
//	base/ws/etc-link     ->  /etc
//	base/ws/dangling-in  ->  base/ws/not-yet        (dangling, inside)
//	base/ws/dangling-out ->  base/nowhere/x         (dangling, outside)
//	base/ws/hop          ->  base/hop2 -> base/ws/src (leaves and comes back)
//	base/ws/loop1 <-> base/ws/loop2                  (symlink loop)
//	base/ws/src/up       ->  ../..                  (climbs to base)
//	base/outside/
//	base/ws-link         ->  base/ws                (the workspace via a symlink)
type fixture struct {
	base, ws, outside string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{filepath.Join(f.ws, "src", "pkg"), f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.ws, "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		filepath.Join(f.ws, "in-link"):      filepath.Join(f.ws, "src"),
		filepath.Join(f.ws, "rel-in"):       "src/pkg",
		filepath.Join(f.ws, "out-link"):     f.outside,
		filepath.Join(f.ws, "rel-out"):      "../outside",
		filepath.Join(f.ws, "etc-link"):     "/etc",
		filepath.Join(f.ws, "dangling-in"):  filepath.Join(f.ws, "not-yet"),
		filepath.Join(f.ws, "dangling-out"): filepath.Join(base, "nowhere", "x"),
		filepath.Join(f.ws, "hop"):          filepath.Join(base, "hop2"),
		filepath.Join(base, "hop2"):         filepath.Join(f.ws, "src"),
		filepath.Join(f.ws, "loop1"):        filepath.Join(f.ws, "loop2"),
		filepath.Join(f.ws, "loop2"):        filepath.Join(f.ws, "loop1"),
		filepath.Join(f.ws, "src", "up"):    "../..",
		filepath.Join(base, "ws-link"):      f.ws,
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Skipf("symlinks not supported here: %v", err)
		}
	}
	return f
}

func TestResolveHost(t *testing.T) {
	f := newFixture(t)
	cwd := f.ws
	tests := []struct {
		name      string
		requested string
		wantDir   string
		wantWarn  string // substring; "" = no warning
	}{
		{"empty", "", cwd, ""},
		{"white space", "  \t", cwd, ""},
		{"absolute dir", f.outside, f.outside, ""},
		{"relative dir", "src/pkg", filepath.Join(cwd, "src", "pkg"), ""},
		{"relative cleaned", "./src/../src//pkg/", filepath.Join(cwd, "src", "pkg"), ""},
		{"dot dot relative", "..", f.base, ""},
		{"trimmed", "  src  ", filepath.Join(cwd, "src"), ""},
		{"symlink to dir kept as given", "in-link", filepath.Join(cwd, "in-link"), ""},
		{"missing", "nope", cwd, "does not exist"},
		{"missing absolute", filepath.Join(f.base, "nope", "deeper"), cwd, "does not exist"},
		{"not a directory", "file.txt", cwd, "is not a directory"},
		{"under a file", "file.txt/sub", cwd, "does not exist"},
		{"dangling symlink", "dangling-in", cwd, "does not exist"},
		{"symlink loop", "loop1", cwd, "cannot be used"},
		{"nul byte", "a\x00b", cwd, "not a valid path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, warn := ResolveHost(cwd, tt.requested)
			if dir != tt.wantDir {
				t.Errorf("dir = %q, want %q", dir, tt.wantDir)
			}
			if tt.wantWarn == "" {
				if warn != "" {
					t.Errorf("unexpected warning %q", warn)
				}
				return
			}
			if !strings.Contains(warn, tt.wantWarn) {
				t.Errorf("warning %q does not contain %q", warn, tt.wantWarn)
			}
			if !strings.Contains(warn, "using "+cwd) {
				t.Errorf("warning %q does not name the fallback", warn)
			}
			named := filepath.Base(tt.requested)
			if strings.Contains(tt.requested, "\x00") {
				named = `a\x00b`
			}
			if !strings.Contains(warn, named) {
				t.Errorf("warning %q does not name the requested path %q", warn, tt.requested)
			}
		})
	}
}

func TestParseAccess(t *testing.T) {
	tests := []struct {
		in      string
		want    Access
		wantErr bool
	}{
		{"none", AccessNone, false},
		{"ro", AccessRO, false},
		{"rw", AccessRW, false},
		{" RW ", AccessRW, false},
		{"", "", true},
		{"read-only", "", true},
		{"rwx", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAccess(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseAccess(%q) = %q, %v", tt.in, got, err)
			}
			if err != nil && (!errors.Is(err, ErrInvalidAccess) || !strings.Contains(err.Error(), "none, ro or rw")) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

func TestContainsPath(t *testing.T) {
	tests := []struct {
		root, path string
		want       bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/", true},
		{"/a/b/", "/a/b/c", true},
		{"/a/b", "/a/b/c/d", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/a/b", "/a/b/../c", false},
		{"/a/b", "/a/b/c/../..", false},
		{"/a/b", "/a/b/c/..", true},
		{"/a/./b", "/a/b/c", true},
		{"/", "/anything", true},
		{"/", "/", true},
		{"/a", "a", false},
		{"a", "/a", false},
		{"", "/a", false},
		{"/a", "", false},
		{"a", "a/b", true},
		{".", "x/y", true},
		{".", "../x", false},
		{"/workspace", "/workspace/%2e%2e/etc", true},
		{"/workspace", "/workspace/...", true},
	}
	for _, tt := range tests {
		if got := ContainsPath(tt.root, tt.path); got != tt.want {
			t.Errorf("ContainsPath(%q, %q) = %v, want %v", tt.root, tt.path, got, tt.want)
		}
	}
}

func TestToSandbox(t *testing.T) {
	f := newFixture(t)
	ws := f.ws
	tests := []struct {
		name      string
		access    Access
		requested string
		want      string // container path; "" = refused
		reason    string // substring of the EscapeError reason
	}{
		{"empty", AccessRW, "", "/workspace", ""},
		{"white space", AccessRO, " ", "/workspace", ""},

		// relative paths are relative to /workspace
		{"relative", AccessRW, "src/pkg", "/workspace/src/pkg", ""},
		{"relative ro", AccessRO, "src", "/workspace/src", ""},
		{"relative dot", AccessNone, ".", "/workspace", ""},
		{"relative dotdot inside", AccessRW, "src/../src/pkg", "/workspace/src/pkg", ""},
		{"relative escape", AccessRW, "../etc", "", "`..` leaves"},
		{"relative deep escape", AccessRW, "src/../../../etc/passwd", "", "`..` leaves"},

		// container paths
		{"container root", AccessRW, "/workspace", "/workspace", ""},
		{"container sub", AccessRW, "/workspace/a/b/", "/workspace/a/b", ""},
		{"container dotdot inside", AccessRW, "/workspace/a/../b", "/workspace/b", ""},
		{"container escape", AccessRW, "/workspace/../etc", "", "`..` leaves"},
		{"container escape deep", AccessNone, "/workspace/a/../../etc", "", "`..` leaves"},
		{"container escape to prefix twin", AccessRW, "/workspace/../workspace2", "", "`..` leaves"},
		{"container twin", AccessRW, "/workspace2/x", "", "not inside"},
		{"agent ro", AccessRO, "/agent/src", "/agent/src", ""},
		{"agent escape ro", AccessRO, "/agent/../etc", "", "`..` leaves"},
		{"agent rw refused", AccessRW, "/agent/src", "", "not inside"},
		{"agent none refused", AccessNone, "/agent", "", "not inside"},
		{"workspace ro is sandbox dir", AccessRO, "/workspace/tmp", "/workspace/tmp", ""},

		// encoded-looking segments are plain names
		{"percent dots", AccessRW, "/workspace/%2e%2e/etc", "/workspace/%2e%2e/etc", ""},
		{"percent dots relative", AccessRW, "%2e%2e/%2e%2e/etc", "/workspace/%2e%2e/%2e%2e/etc", ""},
		{"percent slash", AccessRW, "..%2f..%2fetc", "/workspace/..%2f..%2fetc", ""},
		{"three dots", AccessRW, "/workspace/.../x", "/workspace/.../x", ""},
		{"one dot leaders", AccessRW, "\u2024\u2024/etc", "/workspace/\u2024\u2024/etc", ""},
		{"backslashes", AccessRW, `..\..\etc`, `/workspace/..\..\etc`, ""},

		// host paths inside the workspace
		{"host root rw", AccessRW, ws, "/workspace", ""},
		{"host sub rw", AccessRW, filepath.Join(ws, "src", "pkg"), "/workspace/src/pkg", ""},
		{"host sub ro", AccessRO, filepath.Join(ws, "src"), "/agent/src", ""},
		{"host root ro", AccessRO, ws, "/agent", ""},
		{"host sub none", AccessNone, filepath.Join(ws, "src"), "/workspace/src", ""},
		{"host missing sub", AccessRW, filepath.Join(ws, "new", "dir"), "/workspace/new/dir", ""},
		{"host dotdot inside", AccessRW, ws + "/src/../src/pkg", "/workspace/src/pkg", ""},
		{"host dotdot escape", AccessRW, ws + "/../outside", "", "`..` leaves"},
		{"host dotdot escape deep", AccessRO, ws + "/src/../../..", "", "`..` leaves"},
		{"host via odd route", AccessRW, f.base + "/x/../ws/src", "/workspace/src", ""},
		{"host prefix twin", AccessRW, ws + "2/x", "", "not inside"},
		{"host outside", AccessRW, f.outside, "", "not inside"},
		{"host etc", AccessRW, "/etc", "", "not inside"},

		// symlinks
		{"symlink inside absolute", AccessRW, filepath.Join(ws, "in-link", "pkg"), "/workspace/src/pkg", ""},
		{"symlink inside relative", AccessRO, filepath.Join(ws, "rel-in"), "/agent/src/pkg", ""},
		{"symlink outside", AccessRW, filepath.Join(ws, "out-link"), "", "symlink component"},
		{"symlink outside sub", AccessRW, filepath.Join(ws, "out-link", "sub"), "", "symlink component"},
		{"symlink relative outside", AccessRO, filepath.Join(ws, "rel-out"), "", "symlink component"},
		{"symlink to etc", AccessRW, filepath.Join(ws, "etc-link"), "", "symlink component"},
		{"dangling inside", AccessRW, filepath.Join(ws, "dangling-in"), "/workspace/not-yet", ""},
		{"dangling outside", AccessRW, filepath.Join(ws, "dangling-out"), "", "symlink component"},
		{"leaves and returns", AccessRW, filepath.Join(ws, "hop", "pkg"), "/workspace/src/pkg", ""},
		{"nested climbing symlink", AccessRW, filepath.Join(ws, "src", "up"), "", "symlink component"},
		{"nested climbing symlink below", AccessRW, filepath.Join(ws, "src", "up", "ws"), "", "symlink component"},
		{"workspace through its symlink", AccessRW, filepath.Join(f.base, "ws-link", "src"), "/workspace/src", ""},
		{"workspace through its symlink, then out", AccessRW, filepath.Join(f.base, "ws-link", "out-link"), "", "not inside"},
		{"outside symlink into workspace", AccessRO, filepath.Join(f.base, "hop2", "pkg"), "/agent/src/pkg", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ToSandbox(ws, tt.access, tt.requested)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("ToSandbox(%q) = %q, %v; want %q", tt.requested, got, err, tt.want)
				}
				return
			}
			var ee *EscapeError
			if !errors.As(err, &ee) || !errors.Is(err, ErrEscape) {
				t.Fatalf("ToSandbox(%q) = %q, %v; want *EscapeError", tt.requested, got, err)
			}
			if got != "" {
				t.Errorf("refused path returned %q", got)
			}
			if !strings.Contains(ee.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", ee.Reason, tt.reason)
			}
			if ee.Path != tt.requested || !strings.Contains(err.Error(), tt.requested) {
				t.Errorf("error %q does not name the requested path", err)
			}
		})
	}
}

func TestToSandboxWorkspaceIsSymlink(t *testing.T) {
	f := newFixture(t)
	wsLink := filepath.Join(f.base, "ws-link")
	tests := []struct {
		requested, want string
	}{
		{filepath.Join(wsLink, "src"), "/workspace/src"},
		{filepath.Join(f.ws, "src"), "/workspace/src"}, // the real path of a symlinked workspace
		{filepath.Join(wsLink, "in-link"), "/workspace/src"},
	}
	for _, tt := range tests {
		got, err := ToSandbox(wsLink, AccessRW, tt.requested)
		if err != nil || got != tt.want {
			t.Errorf("ToSandbox(%q) = %q, %v; want %q", tt.requested, got, err, tt.want)
		}
	}
	if _, err := ToSandbox(wsLink, AccessRW, filepath.Join(wsLink, "out-link")); !errors.Is(err, ErrEscape) {
		t.Errorf("out-link through symlinked workspace: %v", err)
	}
}

func TestToSandboxErrors(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name      string
		ws        string
		access    Access
		requested string
		target    error
	}{
		{"unknown access", f.ws, Access("rwx"), "src", ErrInvalidAccess},
		{"empty access", f.ws, Access(""), "src", ErrInvalidAccess},
		{"nul byte", f.ws, AccessRW, "/workspace/a\x00b", ErrInvalidPath},
		{"relative workspace", "ws", AccessRW, "/workspace", ErrInvalidPath},
		{"loop", f.ws, AccessRW, filepath.Join(f.ws, "loop1", "x"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ToSandbox(tt.ws, tt.access, tt.requested)
			if err == nil || got != "" {
				t.Fatalf("ToSandbox = %q, %v; want error", got, err)
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Fatalf("error %v does not match %v", err, tt.target)
			}
		})
	}

	// With no host workspace only container and relative paths map.
	if got, err := ToSandbox("", AccessRW, "/workspace/x"); err != nil || got != "/workspace/x" {
		t.Errorf("no workspace, container path: %q, %v", got, err)
	}
	if _, err := ToSandbox("", AccessRW, "/home/u/ws"); !errors.Is(err, ErrEscape) {
		t.Errorf("no workspace, host path: %v", err)
	}
}

func TestResolveSandbox(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name      string
		requested string
		want      string
		warn      string
	}{
		{"ok", "src", "/workspace/src", ""},
		{"host ok", filepath.Join(f.ws, "src"), "/workspace/src", ""},
		{"escape", "/workspace/../etc", "/workspace", "`..` leaves the workspace"},
		{"symlink", filepath.Join(f.ws, "out-link"), "/workspace", "symlink component"},
		{"outside", "/etc", "/workspace", "not inside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warn := ResolveSandbox(f.ws, AccessRW, tt.requested)
			if got != tt.want {
				t.Errorf("path = %q, want %q", got, tt.want)
			}
			if tt.warn == "" {
				if warn != "" {
					t.Errorf("unexpected warning %q", warn)
				}
				return
			}
			if !strings.Contains(warn, tt.warn) || !strings.Contains(warn, tt.requested) || !strings.HasSuffix(warn, "using /workspace") {
				t.Errorf("warning %q", warn)
			}
		})
	}
}

func TestIsOutside(t *testing.T) {
	f := newFixture(t)
	ws := f.ws
	tests := []struct {
		name    string
		ws      string
		path    string
		want    bool
		wantErr bool
	}{
		{"workspace itself", ws, ws, false, false},
		{"relative dot", ws, ".", false, false},
		{"relative sub", ws, "src/pkg", false, false},
		{"relative missing", ws, "new/file", false, false},
		{"relative escape", ws, "../outside", true, false},
		{"relative escape missing", ws, "../../nowhere", true, false},
		{"absolute inside", ws, filepath.Join(ws, "src"), false, false},
		{"absolute outside", ws, f.outside, true, false},
		{"etc", ws, "/etc/passwd", true, false},
		{"prefix twin", ws, ws + "2", true, false},
		{"symlink inside", ws, "in-link/pkg", false, false},
		{"symlink outside", ws, "out-link", true, false},
		{"symlink outside new file", ws, "out-link/new.txt", true, false},
		{"symlink to etc", ws, "etc-link/passwd", true, false},
		{"relative symlink outside", ws, "rel-out", true, false},
		{"dangling inside", ws, "dangling-in", false, false},
		{"dangling outside", ws, "dangling-out", true, false},
		{"leaves and returns", ws, "hop/pkg", false, false},
		{"climbing symlink", ws, "src/up", true, false},
		{"climbing symlink back in", ws, "src/up/ws/src", false, false},
		{"symlink then dotdot", ws, "in-link/../file.txt", false, false},
		{"outside symlink then dotdot", ws, "out-link/../x", true, false},
		{"outside symlink then dotdot absolute", ws, ws + "/out-link/../outside", true, false},
		{"climbing symlink then dotdot", ws, "src/up/../x", true, false},
		{"through symlinked workspace", filepath.Join(f.base, "ws-link"), "src", false, false},
		{"real path vs symlinked workspace", filepath.Join(f.base, "ws-link"), filepath.Join(ws, "src"), false, false},
		{"loop", ws, "loop1/x", true, true},
		{"relative workspace", "ws", "x", true, true},
		{"nul", ws, "a\x00", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IsOutside(tt.ws, tt.path)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("IsOutside(%q, %q) = %v, %v; want %v, err=%v", tt.ws, tt.path, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestResolveExisting(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		in, want string
	}{
		{"/", "/"},
		{f.ws, f.ws},
		{filepath.Join(f.ws, "in-link"), filepath.Join(f.ws, "src")},
		{f.ws + "/rel-in/..", filepath.Join(f.ws, "src")},
		{filepath.Join(f.ws, "missing", "..", "src"), filepath.Join(f.ws, "src")},
		{filepath.Join(f.ws, "file.txt", "x"), filepath.Join(f.ws, "file.txt", "x")},
		{filepath.Join(f.base, "ws-link", "hop"), filepath.Join(f.ws, "src")},
		{filepath.Join(f.ws, "dangling-out", "y"), filepath.Join(f.base, "nowhere", "x", "y")},
	}
	for _, tt := range tests {
		got, err := resolveExisting(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("resolveExisting(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
