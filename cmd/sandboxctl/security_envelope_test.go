package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxctl/sandboxctl/hostexec"
)

// TestSecurityDaemonGatewayEnvelope: through the real daemon and its host
// supervisor (the supervised gateway path), a gateway command runs as the
// gateway identity, never the daemon's root, with no_new_privs and a
// seccomp filter; it writes exec.cwd and cannot touch or read the daemon's
// state directory.
func TestSecurityDaemonGatewayEnvelope(t *testing.T) {
	root := os.Geteuid() == 0
	ws, err := os.MkdirTemp("", "sbx-daemon-envelope-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(ws) })
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	want := os.Geteuid()
	if root {
		want = hostexec.DefaultIdentity.UID
		if err := os.Chown(ws, want, hostexec.DefaultIdentity.GID); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{state: t.TempDir()}
	e.config = filepath.Join(e.state, "sandboxctl.yaml")
	cfg := fmt.Sprintf("exec:\n  host: gateway\n  security: full\n  ask: \"off\"\n  cwd: %s\n", ws)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.stopDaemon(t) })
	pwned := filepath.Join(e.state, "pwned")
	cmd := `grep -E '^(Uid|NoNewPrivs|Seccomp):' /proc/self/status; echo data > inws && echo wrote; touch ` + pwned + `; cat ` + e.config + `; true`
	r := e.run(t, "exec", "--", cmd)
	u := strconv.Itoa(want)
	for _, w := range []string{"Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u, "NoNewPrivs:\t1", "Seccomp:\t2", "wrote"} {
		if !strings.Contains(r.stdout, w) {
			t.Fatalf("the gateway command's output lacks %q: %+v", w, r)
		}
	}
	if strings.Contains(r.stdout, "host: gateway") {
		t.Fatalf("ATTACK WORKED: a gateway command read the daemon's state directory: %q", r.stdout)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("ATTACK WORKED: a gateway command wrote into the daemon's state directory")
	}
	st, err := os.Stat(filepath.Join(ws, "inws"))
	if err != nil {
		t.Fatalf("the command did not write exec.cwd: %v", err)
	}
	if owner := int(st.Sys().(*syscall.Stat_t).Uid); owner != want {
		t.Fatalf("the file the command wrote belongs to uid %d, want %d", owner, want)
	}
}
