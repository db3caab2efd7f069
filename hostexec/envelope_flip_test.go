package hostexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// TestSecurityGatewayChmodThroughFlippedSymlink replays finding 1 of issue
// 25: with exec.cwd a workspace a sandbox writes and chmod/touch allowed,
// the sandbox flips ./l between a file inside the workspace and a host
// file; Landlock does not cover chmod, chown or utimes, so `chmod 0646 ./l`
// and `touch ./l` changed the host file (as a root daemon: chmod 666
// /etc/shadow). The host file here is root's, 0644, in a directory every
// uid can traverse; the flip is a concurrent process. Its mode and mtime
// must not change, while the command visibly acted on the inside file.
func TestSecurityGatewayChmodThroughFlippedSymlink(t *testing.T) {
	for _, confine := range []bool{true, false} {
		t.Run(fmt.Sprintf("confine=%v", confine), func(t *testing.T) { testChmodFlip(t, confine) })
	}
}

func testChmodFlip(t *testing.T, confine bool) {
	ws := sharedDir(t, DefaultIdentity)
	r := gatewayRunner(t, sharedDir(t, Identity{}), []string{ws})
	host := filepath.Join(sharedDir(t, Identity{}), "host-file")
	if err := os.WriteFile(host, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(host, old, old); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(ws, "inside")
	if err := os.WriteFile(inside, []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(inside, DefaultIdentity.UID, DefaultIdentity.GID); err != nil {
		t.Fatal(err)
	}
	// The sandbox: flips ./l as fast as it can, until the test ends.
	flip := exec.Command("/bin/sh", "-c", `while :; do ln -sfn inside l; ln -sfn "$1" l; done`, "flip", host)
	flip.Dir = ws
	if err := flip.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flip.Process.Kill(); _ = flip.Wait() })

	// At least 30 rounds, and on (up to 2000) until one reached the
	// inside file: a starved flipper cannot make the replay prove nothing.
	cmd := `i=0; while [ $i -lt 2000 ]; do chmod 0646 ./l 2>/dev/null; touch ./l 2>/dev/null; i=$((i+1)); ` +
		`if [ $i -ge 30 ] && [ "$(stat -c %a inside)" = 646 ]; then break; fi; done; echo loop-done`
	spec := hostapi.StartSpec{Command: cmd, Dir: ws}
	if confine {
		spec.Confine = ws
	}
	out, code := runSpecWithin(t, r, spec, 2*time.Minute)
	if code != 0 || !strings.Contains(out, "loop-done") {
		t.Fatalf("the command did not run its loop: exit %d %q", code, out)
	}
	st, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 || !st.ModTime().Equal(old) {
		t.Fatalf("ATTACK WORKED: the host file outside the workspace is now mode %o, mtime %v (was 644, %v)", st.Mode().Perm(), st.ModTime(), old)
	}
	// The command did act through the link while it pointed inside.
	if in, err := os.Stat(inside); err != nil || in.Mode().Perm() != 0o646 {
		t.Fatalf("the command never reached the inside file (mode %v, %v): the replay proves nothing", in.Mode(), err)
	}
}
