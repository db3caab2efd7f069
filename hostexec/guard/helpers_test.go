package guard

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// testHost is a workspace plus two extra bin dirs: tbin is trusted and
// holds stand-ins for shells/wrappers this machine may lack (sudo, zsh,
// ksh, fish); evil is untrusted and holds trojans that touch a marker.
type testHost struct {
	ws, tbin, evil string
	env            AnalyzeEnv
}

func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func newHost(t *testing.T) *testHost {
	t.Helper()
	root := t.TempDir()
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	h := &testHost{ws: filepath.Join(root, "ws"), tbin: filepath.Join(root, "tbin"), evil: filepath.Join(root, "evil")}
	for _, d := range []string{h.ws, h.tbin, h.evil, filepath.Join(h.ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	bash, _ = filepath.EvalSymlinks(bash)
	writeExec(t, filepath.Join(h.tbin, "sudo"), "#!/bin/sh\nexec \"$@\"\n")
	writeExec(t, filepath.Join(h.tbin, "fish"), "#!/bin/sh\nexit 1\n")
	for _, s := range []string{"zsh", "ksh"} {
		if err := os.Symlink(bash, filepath.Join(h.tbin, s)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"jq", "head", "HEAD", "sh", "env", "ls"} {
		writeExec(t, filepath.Join(h.evil, n), "#!/bin/sh\ntouch \"$(dirname \"$0\")/TROJAN_RAN\"\n")
	}
	h.env = AnalyzeEnv{
		Path:        "/usr/local/bin:/usr/bin:/bin:" + h.tbin,
		Cwd:         h.ws,
		TrustedDirs: append(DefaultTrustedDirs(), h.tbin),
	}
	return h
}

func (h *testHost) expand(s string) string {
	return strings.NewReplacer("{ws}", h.ws, "{evil}", h.evil, "{tbin}", h.tbin).Replace(s)
}

// mustNotExist fails when a marker file exists.
func mustNotExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); err == nil {
		t.Fatalf("marker %s exists: the refused part ran", p)
	}
}

// runIfRun executes v.Command with /bin/sh -c in dir when the verdict is
// Run, the way the gateway would, and returns the output.
func runIfRun(t *testing.T, dir string, v Verdict) string {
	t.Helper()
	if v.Decision != vocab.DecisionRun {
		return ""
	}
	cmd := exec.Command("/bin/sh", "-c", v.Command)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func hasRule(a Analysis, r Rule) bool {
	if a.Rule == r {
		return true
	}
	return slices.ContainsFunc(a.Segments, func(s Segment) bool { return s.Rule == r })
}
