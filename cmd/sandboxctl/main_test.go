package main_test

// These tests build the real binary once (TestMain) and run it as a separate
// process against an isolated --state directory, as a user would: the first
// exec starts a daemon in the background, later ones reuse it. Every test
// stops the daemons it started (serve stop, then a kill by pid file), and
// TestMain fails the run if any `serve` of the test binary is left over.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/procfs"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// binary is the sandboxctl built for this run, daemonBinary the sandboxctld
// beside it (where sandboxctl finds it: auto-start and the forwarded
// commands run it).
var binary, daemonBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sandboxctl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The supervisor beside them, as installed: sandboxes run commands
	// through it.
	bins, err := testbuild.Build(dir, "sandboxctl", "sandboxctld", "sandboxctl-supervisor")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary, daemonBinary = bins[0], bins[1]
	code := m.Run()
	if left := leftoverDaemons(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: daemons left running after the tests: %v\n", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return 1
	}
	return code
}

// leftoverDaemons lists the pids of daemons of this run's binaries.
func leftoverDaemons() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && (args[0] == binary || args[0] == daemonBinary) && strings.Contains(string(cmdline), "\x00serve") {
			if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
				continue // a zombie is already dead
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// legacyGateway runs gateway commands as the daemon's user, without the
// envelope (exec.envelope.enabled false): these tests prove the layers
// under it (the guard, the approval peer check, scope) as a daemon whose
// commands share its uid sees them; the envelope has its own tests
// (TestSecurityDaemonGatewayEnvelope here, hostexec's TestSecurityGateway*).
const legacyGateway = "  envelope:\n    enabled: false\n"

// env is an isolated state directory with a config that runs commands on
// the gateway with security full and ask off (no Docker, no guard needed).
type env struct {
	state, config string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{state: t.TempDir()}
	e.config = filepath.Join(e.state, "sandboxctl.yaml")
	cfg := "exec:\n  host: gateway\n  security: full\n  ask: \"off\"\n" + legacyGateway
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.stopDaemon(t) })
	return e
}

// stopDaemon stops the env's daemon: gracefully first, then by pid file.
func (e *env) stopDaemon(t *testing.T) {
	t.Helper()
	pid, _ := readPID(e.state)
	if out, code := e.runCode(t, "serve", "stop"); code != 0 {
		t.Errorf("serve stop: exit %d: %s", code, out)
	}
	if pid > 0 && waitGone(pid, 5*time.Second) != nil {
		t.Errorf("daemon pid %d survived serve stop; killing it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

type result struct {
	stdout, stderr string
	code           int
}

func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return e.runArgv(t, append([]string{"--state", e.state, "--config", e.config}, args...)...)
}

// runArgv runs sandboxctl with exactly full, no --state or --config added.
func (e *env) runArgv(t *testing.T, full ...string) result {
	t.Helper()
	args := full
	cmd := exec.Command(binary, full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("sandboxctl %v did not finish within 60s", args)
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func (e *env) runCode(t *testing.T, args ...string) (string, int) {
	t.Helper()
	r := e.run(t, args...)
	return r.stdout + r.stderr, r.code
}

func readPID(state string) (int, error) {
	data, err := os.ReadFile(filepath.Join(state, "daemon.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// waitGone waits until pid exited entirely: a daemon's leader thread is a
// zombie before its other threads, which still hold its socket, are gone.
func waitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !procfs.Exited("/proc", pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func TestExecAutoStartsDaemon(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "exec", "--", "echo", "hi")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("exec echo hi: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	pid, err := readPID(e.state)
	if err != nil || syscall.Kill(pid, 0) != nil {
		t.Fatalf("no daemon running after auto-start: pid %d, %v", pid, err)
	}
	fi, err := os.Stat(filepath.Join(e.state, "sandboxctl.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v %v", fi, err)
	}
	// The second exec reuses the same daemon.
	if r := e.run(t, "exec", "--", "true"); r.code != 0 {
		t.Fatalf("second exec: %+v", r)
	}
	if pid2, _ := readPID(e.state); pid2 != pid {
		t.Errorf("second exec started another daemon: %d, then %d", pid, pid2)
	}
	// serve stop ends it and cleans up.
	if out, code := e.runCode(t, "serve", "stop"); code != 0 {
		t.Fatalf("serve stop: %d %s", code, out)
	}
	if err := waitGone(pid, 5*time.Second); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"sandboxctl.sock", "daemon.pid"} {
		if _, err := os.Stat(filepath.Join(e.state, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after serve stop: %v", name, err)
		}
	}
}

func TestExecExitCodes(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name             string
		args             []string
		wantCode         int
		wantOut, wantErr string
	}{
		{"exit 3", []string{"exec", "--", "exit 3"}, 3, "", ""},
		{"flags of the command", []string{"exec", "printf", "%s-%s", "a", "b"}, 0, "a-b", ""},
		{"timeout", []string{"exec", "--timeout", "0.5", "--", "sleep", "5"}, 124, "", "timeout after 0.5s"},
		{"signal", []string{"exec", "--", "kill -9 $$"}, 137, "", "SIGKILL"},
		{"env", []string{"exec", "--env", "GREETING=hello there", "--", "echo $GREETING"}, 0, "hello there\n", ""},
		{"short env", []string{"exec", "-e", "GREETING=hi", "--", "echo $GREETING"}, 0, "hi\n", ""},
		// --yield-ms keeps the tool's text and codes.
		{"tool exit 3", []string{"exec", "--yield-ms", "10000", "--", "exit 3"}, 3, "(Command exited with code 3)", ""},
		{"tool timeout", []string{"exec", "--yield-ms", "10000", "--timeout", "0.5", "--", "sleep", "5"}, 124, "timeout", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(t, tc.args...)
			okOut := strings.Contains(r.stdout, tc.wantOut) && (tc.wantOut != "" || r.stdout == "")
			if r.code != tc.wantCode || !okOut || !strings.Contains(r.stderr, tc.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", r.code, r.stdout, r.stderr, tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
}

func TestExecJSON(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "exec", "--json", "--", "echo", "hi")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &top); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(top) != 2 || top["content"] == nil || top["details"] == nil {
		t.Fatalf("want exactly {content, details}, got %s", r.stdout)
	}
	var res struct {
		Content []struct{ Type, Text string }
		Details api.Details
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].Type != "text" || res.Content[0].Text != "hi\n" ||
		res.Details.Status != "completed" || res.Details.ExitCode != api.Code(0) {
		t.Errorf("result = %+v", res)
	}
}

func TestProcessFlow(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "exec", "--json", "--background", "--", "echo started; sleep 0.3; echo finished")
	var res struct{ Details api.Details }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("background exec: %v %+v", err, r)
	}
	id := res.Details.SessionID
	if id == "" {
		t.Fatalf("no sessionId in %v", res.Details)
	}
	if r := e.run(t, "process", "list"); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("process list: %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.run(t, "process", "poll", id, "--timeout-ms", "1000")
		if r.code != 0 {
			t.Fatalf("poll: %+v", r)
		}
		if strings.Contains(r.stdout, "Process exited with code 0.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not finish: %q", id, r.stdout)
		}
	}
	if r := e.run(t, "process", "log", id); r.code != 0 || !strings.Contains(r.stdout, "finished") {
		t.Errorf("process log: %+v", r)
	}
	if r := e.run(t, "process", "remove", id); r.code != 0 {
		t.Errorf("process remove: %+v", r)
	}
	// Sessions are scoped: another agent does not see this one's.
	if r := e.run(t, "process", "poll", id, "--agent", "someone-else"); r.code != 1 {
		t.Errorf("foreign poll: %+v", r)
	}
}

// TestExecArgv: one argument after -- is a shell command line, several are
// the words of one command, each passed as it is (as docker exec does).
func TestExecArgv(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sh", "-c", "echo hello"}, "hello\n"},
		{[]string{"echo", "a  b", "$HOME", "it's", "*", "a;b"}, "a  b $HOME it's * a;b\n"},
		{[]string{"echo $((6*7)) | tr 4 x"}, "x2\n"},
	} {
		r := e.run(t, append([]string{"exec", "--"}, tc.args...)...)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("exec -- %q: exit %d stdout %q stderr %q, want %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

func TestProcessPollUnknown(t *testing.T) {
	e := newEnv(t)
	out, code := e.runCode(t, "process", "poll", "nope")
	if code != 1 || !strings.Contains(out, "No session found for nope") {
		t.Errorf("exit %d, output %q", code, out)
	}
}

func TestBadUsage(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"env without =", []string{"exec", "--env", "FOO", "--", "true"}, `invalid --env "FOO": variables must be in KEY=VALUE format`},
		{"unknown flag", []string{"exec", "--bogus", "--", "true"}, "unknown flag: --bogus"},
		{"yield not a number", []string{"exec", "--yield-ms", "soon", "--", "true"}, `invalid argument "soon" for "--yield-ms"`},
		{"no command", []string{"exec"}, "missing COMMAND"},
		{"blank command", []string{"exec", "--", " "}, "Provide a command to start."},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"process without action", []string{"process"}, "missing ACTION"},
		{"poll without id", []string{"process", "poll"}, "missing ID"},
		{"resize without size", []string{"process", "resize", "x"}, "--cols and --rows are required"},
		{"rm without name", []string{"sandbox", "rm"}, "missing ID"},
		{"pause without id", []string{"sandbox", "pause"}, "missing ID"},
		{"extend without ttl", []string{"sandbox", "extend", "x"}, "--ttl must be a positive duration"},
		{"ls with a bad filter", []string{"sandbox", "ls", "--filter", "colour=red"}, `unknown key "colour"`},
		{"ls with a bad format", []string{"sandbox", "ls", "--format", "{{.ID"}, "--format"},
		{"create with a bad label", []string{"sandbox", "create", "--label", "novalue"}, `--label "novalue": want KEY=VALUE`},
		{"create with a negative ttl", []string{"sandbox", "create", "--ttl", "-1s"}, "--ttl -1s"},
		{"rm name and agent", []string{"sandbox", "rm", "x", "--agent", "a"}, "not both"},
		{"unknown approvals subcommand", []string{"approvals", "frobnicate"}, `approvals: unknown command "frobnicate"`},
		{"unknown sandbox subcommand", []string{"sandbox", "frobnicate"}, `sandbox: unknown command "frobnicate"`},
		{"unknown node subcommand", []string{"node", "frobnicate"}, `node: unknown command "frobnicate"`},
		{"unknown serve subcommand", []string{"serve", "frobnicate"}, `serve: unknown command "frobnicate"`},
		{"yield too short", []string{"exec", "--yield-ms", "0", "--", "true"}, "--yield-ms 0 is out of range: allowed 10..120000"},
		{"yield too long", []string{"exec", "--yield-ms", "200000", "--", "true"}, "--yield-ms 200000 is out of range: allowed 10..120000"},
		{"timeout not positive", []string{"exec", "--timeout", "0", "--", "true"}, "--timeout 0 is out of range"},
		{"poll wait too long", []string{"process", "poll", "x", "--timeout-ms", "60000"}, "--timeout-ms 60000 is out of range: allowed 0..30000"},
		{"argv word with a newline", []string{"exec", "--", "printf", "a\nb"}, "pass the whole command as one shell command line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(t, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.wantMsg) || !strings.HasPrefix(r.stderr, "sandboxctl: ") ||
				strings.HasPrefix(r.stderr, "sandboxctl: sandboxctl") {
				t.Errorf("exit %d, stderr %q; want exit 2 with %q behind one prefix", r.code, r.stderr, tc.wantMsg)
			}
		})
	}
	// None of this needed, or started, a daemon.
	if _, err := os.Stat(filepath.Join(e.state, "sandboxctl.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad usage started a daemon: %v", err)
	}
	// Input the API refuses is exit 2 too, with its message.
	r := e.run(t, "exec", "--security", "sometimes", "--", "true")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "sandboxctl: ") || !strings.Contains(r.stderr, "sometimes") {
		t.Errorf("bad --security: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestBadConfig(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.config, []byte("exec:\n  hots: gateway\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run(t, "exec", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "hots") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming the key", r.code, r.stderr)
	}
}

func TestSecondServeRefused(t *testing.T) {
	e := newEnv(t)
	if r := e.run(t, "serve", "--foreground=false"); r.code != 0 || !strings.Contains(r.stdout, "daemon running") {
		t.Fatalf("detached serve: %+v", r)
	}
	r := e.run(t, "serve")
	if r.code != 1 || !strings.Contains(r.stderr, "already running") {
		t.Errorf("second serve: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := e.run(t, "exec", "--", "true"); r.code != 0 {
		t.Errorf("first daemon hurt by the refused one: %+v", r)
	}
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	if r := e.run(t, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "sandboxctl ") {
		t.Errorf("--version: %+v", r)
	}
	r := e.run(t, "version", "--json")
	var v map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 || v["version"] == "" {
		t.Errorf("version --json: %v %+v", err, r)
	}
}

func TestDaemonCrashRecovery(t *testing.T) {
	e := newEnv(t)
	if r := e.run(t, "exec", "--", "true"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	pid, err := readPID(e.state)
	if err != nil {
		t.Fatal(err)
	}
	// A daemon killed outright leaves its socket and pid file behind; the
	// next exec must notice nobody answers and start a fresh daemon.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(pid, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r := e.run(t, "exec", "--", "echo", "again")
	if r.code != 0 || r.stdout != "again\n" {
		log, _ := os.ReadFile(filepath.Join(e.state, "daemon.log"))
		t.Fatalf("exec after crash: %+v\ndaemon.log:\n%s", r, log)
	}
	if pid2, _ := readPID(e.state); pid2 == pid || pid2 == 0 {
		t.Errorf("no new daemon: pid %d then %d", pid, pid2)
	}
}

// TestSandboxCommands runs the sandbox subcommands and a sandbox exec on a
// real Docker Engine with the default image.
func TestSandboxCommands(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	cfg := fmt.Sprintf("sandbox:\n  workspaceRoot: %s\n", filepath.Join(e.state, "ws"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run(t, "sandbox", "ls"); r.code != 0 {
		t.Fatalf("sandbox ls: %+v", r)
	}
	agent := fmt.Sprintf("clitest-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", agent) })

	r := e.run(t, "exec", "--agent", agent, "--", "echo in-sandbox; test -d /workspace && exit 3")
	if r.code != 3 || !strings.Contains(r.stdout, "in-sandbox") {
		t.Fatalf("sandbox exec: %+v", r)
	}
	r = e.run(t, "--json", "sandbox", "ls")
	var list []struct{ Name, AgentID, State string }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 {
		t.Fatalf("sandbox ls --json: %v %+v", err, r)
	}
	var name string
	for _, s := range list {
		if s.AgentID == agent {
			name = s.Name
		}
	}
	if name == "" {
		t.Fatalf("agent %s's sandbox not listed: %s", agent, r.stdout)
	}
	if r := e.run(t, "sandbox", "explain", "--agent", agent); r.code != 0 || !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, "recreate:") {
		t.Errorf("explain: %+v", r)
	}
	if r := e.run(t, "sandbox", "prune", "--dry-run"); r.code != 0 || strings.Contains(r.stdout, name) {
		t.Errorf("prune --dry-run lists a fresh sandbox: %+v", r)
	}
	if r := e.run(t, "sandbox", "rm", name); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r := e.run(t, "sandbox", "rm", name); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("second rm: %+v", r)
	}
	if r := e.run(t, "sandbox", "shell", "--agent", agent); r.code != 2 || !strings.Contains(r.stderr, "not a terminal") {
		t.Errorf("shell without a terminal: %+v", r)
	}
}
