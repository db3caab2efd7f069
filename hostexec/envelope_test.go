package hostexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// sharedDir makes a directory that every uid may traverse (t.TempDir's
// parents are 0700), owned by owner (-1: root), removed at the end.
func sharedDir(t *testing.T, owner Identity) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sbx-envelope-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if owner.UID > 0 {
		if err := os.Chown(d, owner.UID, owner.GID); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestSecurityGatewaySecretsUnreadable replays finding 2 of issue 25: the
// ruleset granted all of ~/.config/git (git's credential store) and
// /etc/ssl (private keys under /etc/ssl/private). A 0600 credential file
// there must be unreadable to a gateway command, while git's configuration
// beside it stays readable.
func TestSecurityGatewaySecretsUnreadable(t *testing.T) {
	for _, confine := range []bool{true, false} {
		for _, envelope := range []bool{false, true} {
			if !confine && !envelope {
				continue // an unconfined command without the envelope reads what its uid can
			}
			t.Run(fmt.Sprintf("confine=%v,envelope=%v", confine, envelope), func(t *testing.T) {
				home := sharedDir(t, Identity{})
				ws := sharedDir(t, DefaultIdentity)
				// A secret location the configuration declares: even its
				// world-readable file stays unreadable.
				vault := filepath.Join(sharedDir(t, Identity{}), "vault")
				var r *Runner
				if envelope {
					r = gatewayRunner(t, home, []string{ws}, vault)
				} else {
					r = confinedRunner(t)
					r.environ = envguardMerge(r.environ, "HOME", home)
				}
				gitDir := filepath.Join(home, ".config", "git")
				for p, data := range map[string]string{
					filepath.Join(gitDir, "credentials"): "https://user:PLANTED-PASSWORD@example.com\n",
					filepath.Join(gitDir, "config"):      "[user]\n\tname = GIT-CONFIG-OK\n",
					filepath.Join(vault, "key"):          "PLANTED-KEY\n",
					filepath.Join(vault, "public"):       "PLANTED-PUBLIC\n",
				} {
					mode := os.FileMode(0o644)
					if strings.Contains(data, "PASSWORD") || strings.Contains(data, "KEY") {
						mode = 0o600
					}
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte(data), mode); err != nil {
						t.Fatal(err)
					}
				}
				cmd := `cat "$HOME/.config/git/credentials"; echo; cat "$HOME/.config/git/config"`
				if envelope && !confine {
					cmd += "; cat " + vault + "/key " + vault + "/public"
				}
				spec := hostapi.StartSpec{Command: cmd, Dir: ws}
				if confine {
					spec.Confine = ws
				}
				out, _ := runSpec(t, r, spec)
				for _, leak := range []string{"PLANTED-PASSWORD", "PLANTED-KEY", "PLANTED-PUBLIC"} {
					if strings.Contains(out, leak) {
						t.Fatalf("ATTACK WORKED: a gateway command read a secret location (%s): %q", leak, out)
					}
				}
				if !strings.Contains(out, "credentials: Permission denied") {
					t.Fatalf("reading the credential store was not refused by the kernel: %q", out)
				}
				if envelope && !confine && strings.Count(out, "Permission denied") != 3 {
					t.Fatalf("reading the declared secret location was not refused: %q", out)
				}
				if !strings.Contains(out, "GIT-CONFIG-OK") {
					t.Fatalf("git's configuration beside the credentials is no longer readable: %q", out)
				}
			})
		}
	}
}

// envguardMerge sets key=value in environ.
func envguardMerge(environ []string, key, value string) []string {
	out := []string{key + "=" + value}
	for _, kv := range environ {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// gatewayRunner is the gateway's runner as the daemon builds it: every
// command in the envelope, as DefaultIdentity when the test runs as root
// (it does in CI), writing only writable, the default secret locations
// of home plus secrets unreadable. The launcher is this test binary.
func gatewayRunner(t *testing.T, home string, writable []string, secrets ...string) *Runner {
	t.Helper()
	if _, err := LandlockABI(); err != nil {
		t.Fatalf("this machine must have Landlock for these tests: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := &Envelope{Writable: writable, Secrets: DefaultSecrets(home, "", secrets...)}
	if os.Geteuid() == 0 {
		if err := CheckIdentity(DefaultIdentity, SystemIdentityFiles); err != nil {
			t.Fatalf("the default gateway identity cannot be used on this machine: %v", err)
		}
		id := DefaultIdentity
		env.Identity = &id
	}
	return newTestRunner(t, Options{Launcher: self, Envelope: env, Environ: envguardMerge(testEnviron(t), "HOME", home)})
}

// wantUID is the uid a gateway command runs as in these tests.
func wantUID() int {
	if os.Geteuid() == 0 {
		return DefaultIdentity.UID
	}
	return os.Geteuid()
}

// TestSecurityGatewayCommandIdentity: a gateway command is never root: it
// runs as the gateway identity with no supplementary groups, no_new_privs
// and a seccomp filter (/proc/self/status: NoNewPrivs 1, Seccomp 2), with
// pipes and with a terminal; unshare (a user namespace would give it every
// capability there), mount and ptrace are refused, and su cannot get root
// back.
func TestSecurityGatewayCommandIdentity(t *testing.T) {
	home := sharedDir(t, Identity{})
	ws := sharedDir(t, DefaultIdentity)
	r := gatewayRunner(t, home, []string{ws})
	status := `grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp):' /proc/self/status`
	for _, pt := range []bool{false, true} {
		var out string
		if pt {
			p := start(t, r, hostapi.StartSpec{Command: status + "; echo done", Dir: ws, PTY: true})
			out = strings.ReplaceAll(collect(p.Stdout()).wait(t, 20*time.Second), "\r", "")
		} else {
			out, _ = runSpec(t, r, hostapi.StartSpec{Command: status, Dir: ws})
		}
		u := strconv.Itoa(wantUID())
		for _, want := range []string{"Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u + "\n", "NoNewPrivs:\t1\n", "Seccomp:\t2\n"} {
			if !strings.Contains(out, want) {
				t.Fatalf("pty=%v: /proc/self/status lacks %q: %q", pt, want, out)
			}
		}
		if os.Geteuid() == 0 && !regexp.MustCompile(`(?m)^Groups:\s*$`).MatchString(out) {
			t.Fatalf("pty=%v: the command kept supplementary groups: %q", pt, out)
		}
	}
	for cmd, want := range map[string]string{
		"unshare -U true":           "Operation not permitted",
		"unshare -r true":           "Operation not permitted",
		"unshare -m true":           "Operation not permitted",
		"su -c 'id -u' root":        "",
		"mount -t tmpfs none " + ws: "",
	} {
		out, code := runSpec(t, r, hostapi.StartSpec{Command: cmd, Dir: ws})
		if code == 0 || strings.Contains(out, "\n0\n") {
			t.Errorf("%q succeeded in the envelope: %q", cmd, out)
		}
		if want != "" && !strings.Contains(out, want) {
			t.Errorf("%q: %q lacks %q", cmd, out, want)
		}
	}
}

// A gateway command in the envelope still works: it reads system files
// and writes its workspace, through its own pipes and terminal reopened
// by name; it writes nowhere else.
func TestEnvelopeCommandWorks(t *testing.T) {
	home := sharedDir(t, Identity{})
	ws := sharedDir(t, DefaultIdentity)
	outside := sharedDir(t, DefaultIdentity) // its uid could write it: Landlock refuses
	r := gatewayRunner(t, home, []string{ws})
	script := `set -e
head -n 1 /etc/passwd >/dev/null
echo new > out.txt; cat out.txt
mkdir -p a/b; cp out.txt a/b/copy; mv a/b/copy moved; rm moved
echo via-stdout > /dev/stdout
echo via-stderr > /dev/stderr
ls /usr/bin >/dev/null
echo done`
	out, code := runSpec(t, r, hostapi.StartSpec{Command: script, Dir: ws})
	for _, w := range []string{"new", "via-stdout", "via-stderr", "done"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Fatalf("script: exit %d, %q lacks %q", code, out, w)
		}
	}
	p := start(t, r, hostapi.StartSpec{Command: "tty >/dev/null && echo x > \"$(tty)\" && echo x > /dev/tty && echo tty-ok", Dir: ws, PTY: true})
	if s := collect(p.Stdout()).wait(t, 20*time.Second); !strings.Contains(s, "tty-ok") {
		t.Fatalf("terminal in the envelope: %q", s)
	}
	out, code = runSpec(t, r, hostapi.StartSpec{Command: "echo pwned > " + outside + "/f", Dir: ws})
	if code == 0 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("a write outside the writable directories: exit %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Fatal("a gateway command wrote outside its writable directories")
	}
}

// The envelope fails closed: on a kernel whose Landlock is too old (or
// missing) nothing starts, and a launcher that cannot enforce its policy
// never runs the command.
func TestEnvelopeFailsClosed(t *testing.T) {
	home := sharedDir(t, Identity{})
	ws := sharedDir(t, DefaultIdentity)
	r := gatewayRunner(t, home, []string{ws})
	marker := filepath.Join(ws, "ran")
	for _, abi := range []func() (int, error){
		func() (int, error) { return 2, nil },
		func() (int, error) { return 0, fmt.Errorf("%w: ENOSYS", ErrLandlockUnavailable) },
	} {
		r.landlockABI = abi
		if _, err := r.Start(context.Background(), hostapi.StartSpec{Command: "touch " + marker, Dir: ws}); !errors.Is(err, ErrEnvelopeUnavailable) {
			t.Fatalf("Start without a usable Landlock: %v", err)
		}
	}
	r.landlockABI = LandlockABI
	// A launcher whose confine directory is gone.
	out, code := runSpec(t, r, hostapi.StartSpec{Command: "touch " + marker, Dir: ws, Confine: filepath.Join(ws, "missing")})
	if code != 126 || !strings.Contains(out, "confine: workspace") {
		t.Fatalf("exit %d %q", code, out)
	}
	// A launcher as root without an identity.
	self, _ := os.Executable()
	if os.Geteuid() == 0 {
		cmd := exec.Command(self, EnvelopeArg, "--write", ws, "--", "/bin/sh", "sh", "-c", "touch "+marker)
		if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "without an identity") {
			t.Fatalf("launcher as root without identity: %v %q", err, b)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran outside its envelope")
	}
	for _, bad := range [][]string{
		{"--uid", "0", "--gid", "0", "--", "/bin/true", "true"},
		{"--uid", "61000", "--", "/bin/true", "true"},
		{"--write", "rel", "--", "/bin/true", "true"},
		{"--", "/bin/true"},
	} {
		if _, _, err := parseEnvelopeArgs(bad); err == nil {
			t.Errorf("launcher arguments %q accepted", bad)
		}
	}
}

// CheckIdentity refuses root and any uid or gid the host's account files
// use, subordinate ranges included.
func TestCheckIdentity(t *testing.T) {
	d := t.TempDir()
	files := IdentityFiles{Passwd: filepath.Join(d, "passwd"), Group: filepath.Join(d, "group"), SubUID: filepath.Join(d, "subuid"), SubGID: filepath.Join(d, "missing")}
	for p, data := range map[string]string{
		files.Passwd: "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nsvc:x:900:61005::/:/bin/false\n",
		files.Group:  "root:x:0:\nalice:x:1000:\nteam:x:62000:\n",
		files.SubUID: "alice:100000:65536\n",
	} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckIdentity(Identity{UID: 61000, GID: 61000}, files); err != nil {
		t.Fatalf("a free identity: %v", err)
	}
	for _, id := range []Identity{{0, 61000}, {61000, 0}, {-1, 5}, {1000, 61000}, {61000, 1000}, {61000, 62000}, {61000, 61005}, {100500, 61000}} {
		if err := CheckIdentity(id, files); err == nil {
			t.Errorf("identity %+v accepted", id)
		}
	}
	if err := CheckIdentity(Identity{UID: 1000, GID: 61000}, files); !errors.Is(err, ErrIdentityInUse) {
		t.Errorf("an account's uid: %v", err)
	}
	files.Passwd = filepath.Join(d, "nope")
	if err := CheckIdentity(Identity{UID: 61000, GID: 61000}, files); err == nil {
		t.Error("a missing passwd file checked nothing and passed")
	}
}

// TestSecurityGatewayCommandsCannotReachEachOther: gateway commands share
// one identity, so the uid does not keep one agent's command from
// another's; their Landlock domains do. A command cannot signal another
// (the signal scope), nor read its environment or memory through /proc
// (Landlock's ptrace rule).
func TestSecurityGatewayCommandsCannotReachEachOther(t *testing.T) {
	home := sharedDir(t, Identity{})
	ws := sharedDir(t, DefaultIdentity)
	r := gatewayRunner(t, home, []string{ws})
	abi, _ := LandlockABI()
	victim := start(t, r, hostapi.StartSpec{Command: "sleep 60", Dir: ws, Env: map[string]string{"VICTIM_TOKEN": "PLANTED-ENV"}})
	pid := strconv.Itoa(victim.PID())
	// The victim is up (its environment carries the tag) before the attack.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + pid + "/environ")
		if strings.Contains(string(b), "PLANTED-ENV") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the victim command did not start: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	attack := "cat /proc/" + pid + "/environ; head -c 16 /proc/" + pid + "/mem; echo"
	if abi >= 6 {
		attack += "; kill -TERM " + pid
	}
	out, _ := runSpec(t, r, hostapi.StartSpec{Command: attack, Dir: ws})
	if strings.Contains(out, "PLANTED-ENV") {
		t.Fatalf("ATTACK WORKED: a gateway command read another's environment: %q", out)
	}
	if !strings.Contains(out, "environ: Permission denied") {
		t.Fatalf("reading another command's environment was not refused: %q", out)
	}
	if abi >= 6 && !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("signalling another command was not refused: %q", out)
	}
	select {
	case <-victim.Done():
		t.Fatal("ATTACK WORKED: another gateway command ended the victim")
	default:
	}
}

// MayWrite reads the mode bits the way the kernel does for the identity.
func TestIdentityMayWrite(t *testing.T) {
	id := DefaultIdentity
	for _, c := range []struct {
		uid, gid int
		mode     os.FileMode
		want     bool
	}{
		{id.UID, 0, 0o700, true}, {id.UID, 0, 0o500, false}, {0, id.GID, 0o770, true}, {0, id.GID, 0o750, false},
		{0, 0, 0o777, true}, {0, 0, 0o755, false}, {id.UID, 0, 0o077, false},
	} {
		fi := dirInfo{mode: c.mode | os.ModeDir, st: &syscall.Stat_t{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
		if got := id.MayWrite(fi); got != c.want {
			t.Errorf("owner %d:%d mode %o: MayWrite %v, want %v", c.uid, c.gid, c.mode, got, c.want)
		}
	}
	if id.MayWrite(dirInfo{mode: 0o777, st: &syscall.Stat_t{}}) {
		t.Error("a file that is not a directory counts as writable")
	}
}

// dirInfo is an os.FileInfo of a directory with given owner and mode.
type dirInfo struct {
	mode os.FileMode
	st   *syscall.Stat_t
}

func (d dirInfo) Name() string       { return "d" }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() os.FileMode  { return d.mode }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return d.mode.IsDir() }
func (d dirInfo) Sys() any           { return d.st }

// A writable directory that holds a secret location is refused: its grant
// would make the secret readable.
func TestEnvelopeRefusesSecretUnderWritable(t *testing.T) {
	home := sharedDir(t, Identity{})
	self, _ := os.Executable()
	env := &Envelope{Writable: []string{home}, Secrets: DefaultSecrets(home, "")}
	if os.Geteuid() == 0 {
		id := DefaultIdentity
		env.Identity = &id
	}
	_, err := NewRunner(context.Background(), Options{Launcher: self, Envelope: env, Environ: testEnviron(t)})
	if !errors.Is(err, os.ErrInvalid) || !strings.Contains(err.Error(), "lies in the writable directory") {
		t.Fatalf("a writable home with its .ssh a secret: %v", err)
	}
}
