package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// forgedServerFrames is what issue 25 finding 5 wrote into the
// supervisor's stdout (/proc/1/fd/1) under gVisor: for every stream id a
// client may have used, output claiming success and an Exit with code 0.
func forgedServerFrames(t *testing.T) []byte {
	t.Helper()
	exit, err := json.Marshal(supervisor.ExitStatus{Code: 0})
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for stream := uint32(1); stream <= 64; stream++ {
		b = supervisor.AppendFrame(b, supervisor.FrameOutput, stream, append([]byte{supervisor.StreamStdout}, "FORGED: all 412 tests passed\n"...))
		b = supervisor.AppendFrame(b, supervisor.FrameExit, stream, exit)
	}
	return b
}

// identityAttackScript is the sandbox side of findings 5 and 7: who am I,
// then forge frames into pid 1's stdout, read its environ and its stdin,
// and signal it.
const identityAttackScript = `
echo "UID $(id -u) GID $(id -g)"
echo "NAME $(id -un) $(id -gn)"
echo "$FRAMES" | base64 -d > /tmp/frames
if timeout 2 sh -c 'cat /tmp/frames > /proc/1/fd/1' 2>/dev/null; then echo "FORGE-WRITE-OK"; fi
if timeout 2 sh -c 'cat /tmp/frames > /proc/1/fd/2' 2>/dev/null; then echo "FORGE-WRITE2-OK"; fi
if timeout 2 sh -c 'exec 3< /proc/1/fd/0 && echo opened' 2>/dev/null | grep -q opened; then echo "STDIN-READ-OK"; fi
if cat /proc/1/environ > /tmp/e1 2>/dev/null; then
  echo "ENVIRON-READABLE"
  env > /tmp/own
  tr '\0' '\n' < /tmp/e1 | while IFS= read -r l; do grep -qxF "$l" /tmp/own || echo "ENVIRON-EXTRA $l"; done
fi
if kill -0 1 2>/dev/null; then echo "SIGNAL-OK"; fi
echo ATTACK-DONE
`

// TestSecuritySandboxIdentityControlStream replays issue 25 findings 5
// and 7 on runc and on runsc (gVisor, whose /proc ignores the
// supervisor's non-dumpable flag). A command of the sandbox writes forged
// Output and Exit frames for every stream id into /proc/1/fd/1, reads
// /proc/1/environ and /proc/1/fd/0 and signals pid 1; another session
// (`sleep 5; exit 3`) must still end with exit 3 and its own output. The
// command must run under a sandbox identity (not uid 1000, the first
// host user), distinct from the supervisor's; on runc the host user 1000
// must not read a command's /proc/PID/environ, reach its workspace
// through /proc/PID/root or signal it, and the workspace on the host is
// 0700 and the identity's.
//
// On the old code it failed: commands ran as uid 1000 (the supervisor
// too), and under runsc the forged frames ended the victim with exit 0
// and output "FORGED: all 412 tests passed".
func TestSecuritySandboxIdentityControlStream(t *testing.T) {
	for _, rt := range []string{"runc", RuntimeRunsc} {
		t.Run(rt, func(t *testing.T) {
			m := newManagerOpts(t, func(o *Options) { o.Config.Docker.Runtime = rt })
			if rt == RuntimeRunsc {
				if err := m.first().checkRuntime(ctxT(t), false); err != nil {
					t.Skipf("the Engine has no runsc (scripts/docker-up.sh registers it): %v", err)
				}
			}
			if m.first().ident == nil {
				t.Fatal("sandbox identities are not in force (the test runs as root with no sandbox.docker.user)")
			}
			identityAttempt(t, m, rt)
		})
	}
}

func identityAttempt(t *testing.T, m *Manager, rt string) {
	s := Scope{AgentID: "victim-" + rt}
	victim := supervisedAnyWarn(t, startCmd(t, m, s, `echo victim-start; sleep 5; echo victim-real; exit 3`, func(o *ExecOptions) {
		o.Env = []string{"DB_PASSWORD=s3cret-" + rt}
	}))
	attack := supervisedAnyWarn(t, startCmd(t, m, s, identityAttackScript, func(o *ExecOptions) {
		o.Env = []string{"FRAMES=" + base64.StdEncoding.EncodeToString(forgedServerFrames(t))}
	}))
	out, errs, code, err := drainErr(t, attack)
	if err != nil || code != 0 || !strings.Contains(out, "ATTACK-DONE") {
		t.Fatalf("attack did not run through: code %d err %v out %q stderr %q", code, err, out, errs)
	}
	bads := []string{"FORGE-WRITE-OK", "FORGE-WRITE2-OK", "STDIN-READ-OK", "ENVIRON-EXTRA", "SIGNAL-OK"}
	if rt == "runc" {
		bads = append(bads, "ENVIRON-READABLE")
	}
	// gVisor lets another uid read /proc/1/environ: it must hold nothing
	// the command does not have itself (no key, no daemon secret).
	for _, bad := range bads {
		if strings.Contains(out, bad) {
			t.Errorf("a sandbox command reached the supervisor: %s (output %q)", bad, out)
		}
	}
	var uid, gid uint32
	if _, err := fmt.Sscanf(out, "UID %d GID %d", &uid, &gid); err != nil {
		t.Fatalf("no uid in %q: %v", out, err)
	}
	r, _ := sandboxconfig.ParseUIDRange("")
	if !r.Contains(uid) || gid != uid || uid == 1000 {
		t.Errorf("commands run as %d:%d, want an id of the sandbox identity range %s", uid, gid, r)
	}

	if !strings.Contains(out, "NAME "+IdentityUserName+" "+IdentityUserName+"\n") {
		t.Errorf("the command uid has no name %q in the container: %q", IdentityUserName, out)
	}

	vout, verrs, vcode, verr := drainErr(t, victim)
	if verr != nil || vcode != 3 || vout != "victim-start\nvictim-real\n" {
		t.Errorf("victim session: code %d err %v output %q stderr %q; want exit 3 and its own output", vcode, verr, vout, verrs)
	}

	// The workspace on the host is the identity's alone.
	_, _, ws, _ := m.Layout(s)
	fi, err := os.Stat(ws)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o700 || st.Uid != uid {
		t.Errorf("workspace %s: mode %v owner %d; want 0700 owned by the sandbox identity %d", ws, fi.Mode().Perm(), st.Uid, uid)
	}
	if rt == "runc" {
		hostUserCannotReach(t, m, s, rt)
	}
}

// hostUserCannotReach runs, as the host's uid 1000, what finding 7 did
// to a running sandbox command: read its environ, list and plant files
// through /proc/PID/root/workspace, signal it.
func hostUserCannotReach(t *testing.T, m *Manager, s Scope, rt string) {
	t.Helper()
	secret := "s3cret-host-" + rt
	p := supervisedAnyWarn(t, startCmd(t, m, s, `echo up; sleep 30`, func(o *ExecOptions) {
		o.Env = []string{"DB_PASSWORD=" + secret}
	}))
	defer func() { _ = p.Kill(ctxT(t)) }()
	buf := make([]byte, 3)
	if _, err := p.Stdout().Read(buf); err != nil {
		t.Fatal(err)
	}
	hostPID := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte("DB_PASSWORD="+secret+"\x00")) && bytes.Contains(b, []byte(string(envknob.RunTag)+"="+p.Tag())) {
			hostPID, _ = strconv.Atoi(strings.Split(f, "/")[2])
			break
		}
	}
	if hostPID == 0 {
		t.Fatal("the sandbox command is not visible on the host as root")
	}
	script := fmt.Sprintf(`p=%d
if cat /proc/$p/environ 2>/dev/null | tr '\0' '\n' | grep -q DB_PASSWORD; then echo ENVIRON-OK; fi
if ls /proc/$p/root/workspace >/dev/null 2>&1; then echo LIST-OK; fi
if echo planted > /proc/$p/root/workspace/PLANTED 2>/dev/null; then echo PLANT-OK; fi
if kill -0 $p 2>/dev/null; then echo SIGNAL-OK; fi
echo HOST-DONE`, hostPID)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "HOST-DONE") {
		t.Fatalf("host user script: %v: %s", err, out)
	}
	for _, bad := range []string{"ENVIRON-OK", "LIST-OK", "PLANT-OK", "SIGNAL-OK"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("host uid 1000 reached the sandbox command %d: %s", hostPID, bad)
		}
	}
}

// supervisedAnyWarn is mustSupervised that accepts warnings (gVisor's
// input-wait note).
func supervisedAnyWarn(t *testing.T, st *Started) *SupervisedExec {
	t.Helper()
	p, ok := st.Process.(*SupervisedExec)
	if !ok {
		t.Fatalf("not on the supervisor path: %T, warnings %q, note %q", st.Process, st.Warnings, st.Ensure.SupervisorNote)
	}
	return p
}
