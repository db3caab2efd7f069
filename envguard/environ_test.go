package envguard

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// pinnedKV are envguard's pinned variables as SanitizeInherited appends them.
var pinnedKV = []string{"EDITOR=/bin/false", "GIT_EDITOR=/bin/false", "LESSSECURE=1", "PAGER=/bin/cat", "VISUAL=/bin/false"}

func TestSanitizeInherited(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"nil gives the pinned variables", nil, pinnedKV},
		{
			"advisory keys dropped, ordinary kept",
			[]string{
				"HOME=/home/u",
				"LD_PRELOAD=/tmp/malware.so",
				"TERM=xterm-256color",
				"NODE_OPTIONS=--require /tmp/x.js",
				"BASH_FUNC_x%%=() { id; }",
				"GLIBC_TUNABLES=glibc.tune.x=1",
				"JAVA_TOOL_OPTIONS=-javaagent:/tmp/a.jar",
				"LANG=C.UTF-8",
				"DYLD_INSERT_LIBRARIES=/tmp/x.dylib",
				"PATH=/usr/bin:/bin",
				"SHELLOPTS=xtrace",
				"PS4=$(id)",
				"ld_preload=/tmp/lower.so",
			},
			append([]string{"HOME=/home/u", "TERM=xterm-256color", "LANG=C.UTF-8", "PATH=/usr/bin:/bin"}, pinnedKV...),
		},
		{
			"override-only keys are inherited",
			[]string{"HOME=/h", "HTTP_PROXY=http://p", "SSH_AUTH_SOCK=/s", "XDG_CONFIG_HOME=/x"},
			append([]string{"HOME=/h", "HTTP_PROXY=http://p", "SSH_AUTH_SOCK=/s", "XDG_CONFIG_HOME=/x"}, pinnedKV...),
		},
		{
			"variables that run commands or load code are dropped (issue 12 item 6)",
			[]string{"HOME=/h", "GIT_SSH_COMMAND=ssh -i k", "GIT_CONFIG_COUNT=0", "PERLLIB=/tmp/p", "LESS=+!id", "PAGER=evil",
				"TAR_OPTIONS=--to-command=id", "MANOPT=-Pid", "GIT_CONFIG=/tmp/c", "GIT_TRACE=/tmp/t", "TERMINFO=/tmp/ti",
				"LOCPATH=/tmp/l", "NLSPATH=/tmp/n", "LESSKEYIN=/tmp/k", "FZF_DEFAULT_COMMAND=id"},
			append([]string{"HOME=/h"}, pinnedKV...),
		},
		{
			"inherited pinned variables are replaced by the pinned values",
			[]string{"LESSSECURE=0", "A=1", "lesssecure=0", "PAGER=less", "EDITOR=vim"},
			append([]string{"A=1"}, pinnedKV...),
		},
		{
			"malformed and invalid entries dropped",
			[]string{"NOEQUALS", "=C:=C:\\x", "=", "A-B=1", "1A=2", "ÄX=3", "OK=", "X=a=b"},
			append([]string{"OK=", "X=a=b"}, pinnedKV...),
		},
		{
			"order and duplicates kept",
			[]string{"B=1", "A=2", "B=3"},
			append([]string{"B=1", "A=2", "B=3"}, pinnedKV...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got := SanitizeInherited(tt.in)
			if got == nil {
				t.Fatal("SanitizeInherited returned nil")
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Fatal("input was modified")
			}
		})
	}
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name      string
		base      []string
		overrides map[string]string
		want      []string
	}{
		{"both empty", nil, nil, []string{}},
		{"base only", []string{"A=1", "B=2"}, nil, []string{"A=1", "B=2"}},
		{"overrides only sorted", nil, map[string]string{"Z": "1", "A": "2", "M": ""}, []string{"A=2", "M=", "Z=1"}},
		{
			"replace in place, append new sorted",
			[]string{"HOME=/h", "TERM=dumb", "LANG=C"},
			map[string]string{"TERM": "xterm", "NEW2": "b", "NEW1": "a"},
			[]string{"HOME=/h", "TERM=xterm", "LANG=C", "NEW1=a", "NEW2=b"},
		},
		{
			"duplicate base keys: first position, last value",
			[]string{"A=1", "B=2", "A=3"},
			nil,
			[]string{"A=3", "B=2"},
		},
		{
			"duplicate base keys overridden once",
			[]string{"A=1", "A=3"},
			map[string]string{"A": "x"},
			[]string{"A=x"},
		},
		{"malformed base dropped", []string{"JUNK", "A=1"}, nil, []string{"A=1"}},
		{"values with equals", []string{"A=b=c"}, map[string]string{"D": "e=f"}, []string{"A=b=c", "D=e=f"}},
		{"case-sensitive keys", []string{"Path=/x"}, map[string]string{"PATH": "/y"}, []string{"Path=/x", "PATH=/y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := slices.Clone(tt.base)
			got := Merge(tt.base, tt.overrides)
			if got == nil {
				t.Fatal("Merge returned nil")
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
			if !slices.Equal(base, tt.base) {
				t.Fatal("base was modified")
			}
		})
	}
}

func TestBuildPath(t *testing.T) {
	tests := []struct {
		name    string
		login   string
		prepend []string
		want    string
	}{
		{"login only", "/usr/bin:/bin", nil, "/usr/bin:/bin"},
		{"prepend first", "/usr/bin:/bin", []string{"/opt/tools/bin"}, "/opt/tools/bin:/usr/bin:/bin"},
		{"dedup first wins", "/usr/bin:/opt/a:/bin:/usr/bin", []string{"/opt/a", "/opt/b", "/opt/a"}, "/opt/a:/opt/b:/usr/bin:/bin"},
		{"dedup after clean", "/usr/bin/:/usr//bin:/usr/bin/.", nil, "/usr/bin"},
		{"empty entries dropped", "::/usr/bin::/bin:", []string{""}, "/usr/bin:/bin"},
		{"relative entries dropped", ".:bin:./node_modules/.bin:/usr/bin", []string{"tools"}, "/usr/bin"},
		{"prepend may be a list", "/bin", []string{"/a:/b"}, "/a:/b:/bin"},
		{"nothing usable falls back", "", nil, DefaultSandboxPath},
		{"only junk falls back", ":.:", []string{""}, DefaultSandboxPath},
		{"prepend without login", "", []string{"/opt/x"}, "/opt/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BuildPath(tt.login, tt.prepend); got != tt.want {
				t.Fatalf("BuildPath(%q, %q) = %q, want %q", tt.login, tt.prepend, got, tt.want)
			}
		})
	}
}

func TestFilterShellWrapperEnv(t *testing.T) {
	in := map[string]string{
		"TERM": "xterm", "LANG": "C.UTF-8", "LC_ALL": "C", "LC_CTYPE": "UTF-8",
		"COLORTERM": "truecolor", "NO_COLOR": "1", "FORCE_COLOR": "0",
		"LC_": "x", "LC_A-B": "x", "term": "x", "HOME": "/h", "LD_PRELOAD": "/x.so",
		"PATH": "/x", "BASH_ENV": "/x", "MY_VAR": "1",
	}
	want := map[string]string{
		"TERM": "xterm", "LANG": "C.UTF-8", "LC_ALL": "C", "LC_CTYPE": "UTF-8",
		"COLORTERM": "truecolor", "NO_COLOR": "1", "FORCE_COLOR": "0",
	}
	got := FilterShellWrapperEnv(in)
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got[%s] = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if len(in) != 15 {
		t.Fatal("input was modified")
	}
	if got := FilterShellWrapperEnv(nil); got == nil || len(got) != 0 {
		t.Fatalf("FilterShellWrapperEnv(nil) = %#v, want empty map", got)
	}
}

// A request may set a pinned variable only to its pinned value; on the
// sandbox nothing is pinned.
func TestPinnedInRequests(t *testing.T) {
	for k, v := range Pinned() {
		if err := CheckRequest(vocab.HostGateway, map[string]string{k: v}); err != nil {
			t.Errorf("%s=%s (the pinned value) refused: %v", k, v, err)
		}
		if err := CheckRequest(vocab.HostNode, map[string]string{k: v + "x"}); err == nil {
			t.Errorf("%s=%sx accepted on a node", k, v)
		}
		if !IsPinned(k) || !IsPinned(strings.ToLower(k)) {
			t.Errorf("IsPinned(%s) = false", k)
		}
	}
	if err := CheckRequest(vocab.HostGateway, map[string]string{"pager": "/bin/cat"}); err == nil {
		t.Error("lower-case pager accepted: only the exact pinned key and value are")
	}
	p := Pinned()
	p["PAGER"] = "less"
	if Pinned()["PAGER"] != "/bin/cat" {
		t.Error("Pinned returned the package's own map")
	}
}
