package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// supervisorBinPath is the binary TestMain built ("" if the build failed).
var supervisorBinPath string

// setupSupervisor builds cmd/sandboxctl-supervisor (static) into a temp dir
// and points SANDBOXCTL_SUPERVISOR at it, so every test of the package runs
// on the supervisor path unless it says otherwise.
func setupSupervisor() func() {
	if os.Getenv("SANDBOXCTL_HELPER_DAEMON") != "" {
		supervisorBinPath = os.Getenv(string(envknob.Supervisor)) // the parent's build
		return func() {}
	}
	dir, err := os.MkdirTemp("", "sandboxctl-supervisor-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor build dir:", err)
		return func() {}
	}
	bins, err := testbuild.Build(dir, SupervisorBinaryName)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bin := bins[0]
	supervisorBinPath = bin
	os.Setenv(string(envknob.Supervisor), bin)
	return func() {
		pruneStaleImages()
		_ = os.RemoveAll(dir)
	}
}

// pruneStaleImages removes derived images of earlier supervisor builds.
func pruneStaleImages() {
	state, err := os.MkdirTemp("", "sandboxctl-prune-")
	if err != nil {
		return
	}
	defer os.RemoveAll(state)
	m, err := NewManager(context.Background(), Options{Config: DefaultConfig(), StateDir: state, Home: state})
	if err != nil {
		return
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = m.PruneSupervisedImages(ctx)
}

// newManagerOpts is newTestManager with Options edits.
func newManagerOpts(t *testing.T, mutate func(*Options)) *Manager {
	t.Helper()
	requireDocker(t)
	cfg := DefaultConfig()
	cfg.Docker.Image = testImage
	cfg.Docker.ContainerPrefix = fmt.Sprintf("sbxt-%s-", randHex(3))
	cfg.WorkspaceRoot = t.TempDir()
	opts := Options{
		Config: cfg, StateDir: t.TempDir(), Home: t.TempDir(),
		Labels: testLabels(testLabel+".prefix", cfg.Docker.ContainerPrefix),
	}
	if mutate != nil {
		mutate(&opts)
	}
	m, err := NewManager(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, _ := m.List(ctx)
		for _, c := range list {
			_ = m.first().removeID(ctx, c.ID)
		}
		_ = m.Close()
	})
	return m
}

func startCmd(t *testing.T, m *Manager, s Scope, script string, mod func(*ExecOptions)) *Started {
	t.Helper()
	opts := ExecOptions{Cmd: []string{"sh", "-c", script}}
	if mod != nil {
		mod(&opts)
	}
	st, err := m.Start(ctxT(t), s, opts)
	if err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	return st
}

func mustSupervised(t *testing.T, st *Started) *SupervisedExec {
	t.Helper()
	p, ok := st.Process.(*SupervisedExec)
	if !ok {
		t.Fatalf("not on the supervisor path: %T, warnings %q, note %q", st.Process, st.Warnings, st.Ensure.SupervisorNote)
	}
	if len(st.Warnings) != 0 {
		t.Fatalf("unexpected warnings: %q", st.Warnings)
	}
	return p
}

func drain(t *testing.T, p Process) (string, string, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	if p.Stderr() != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(&errb, p.Stderr()) }()
	}
	_, _ = io.Copy(&out, p.Stdout())
	wg.Wait()
	code, sig, err := p.Wait(ctxT(t))
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return out.String(), errb.String(), code, sig
}

func TestSupervisedExec(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "sup"}
	st := startCmd(t, m, s, `echo out; echo err >&2; echo "$LANG $HOME $(pwd)"; exit 7`, func(o *ExecOptions) { o.Env = []string{"EXTRA=1"} })
	p := mustSupervised(t, st)
	out, errs, code, sig := drain(t, p)
	if out != "out\nC.UTF-8 /tmp /workspace\n" || errs != "err\n" || code != 7 || sig != "" {
		t.Fatalf("out %q err %q code %d sig %q", out, errs, code, sig)
	}
	// The supervisor is the main process, pid 1 (no docker-init), and the
	// container keeps its hardening. (Its spare launcher, the next
	// command's process, is the same binary.)
	ps, _ := run(t, m, s, `cat /proc/1/cmdline | tr '\0' ' '; echo; for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\0' ' '; echo; done | grep -v -e "^`+SupervisorPath+` `+supervisor.SpareLaunchArg+` $" | grep -c "^`+SupervisorPath+`"`)
	if !strings.HasPrefix(ps, SupervisorPath+" ") || !strings.HasSuffix(strings.TrimSpace(ps), "\n1") {
		t.Fatalf("process table: %q", ps)
	}
	insp, err := m.first().cli.ContainerInspect(ctxT(t), st.Ensure.ID, clientInspect())
	if err != nil {
		t.Fatal(err)
	}
	hc := insp.Container.HostConfig
	if !hc.ReadonlyRootfs || string(hc.NetworkMode) != "none" || insp.Container.Config.Labels[LabelSupervisor] == "" {
		t.Fatalf("hardening lost: ro %v net %s labels %v", hc.ReadonlyRootfs, hc.NetworkMode, insp.Container.Config.Labels)
	}
	// Session state lives under /run/sandboxctl, the supervisor uid's:
	// commands (the command uid) cannot read it.
	cat := []string{"cat", "/run/sandboxctl/" + p.ID() + "/meta.json", "/run/sandboxctl/" + p.ID() + "/exit"}
	if out, code, _ := m.first().run(ctxT(t), st.Ensure.ID, cat); code == 0 {
		t.Fatalf("a command read the supervisor's state: %q", out)
	}
	id, ok := identityOf(insp.Container.Config.Labels)
	if !ok {
		t.Fatal("no sandbox identity")
	}
	e, err := m.ExecIn(ctxT(t), st.Ensure.ID, ExecOptions{Cmd: cat, User: fmt.Sprintf("%d:%d", id.Supervisor, id.Supervisor)})
	if err != nil {
		t.Fatal(err)
	}
	meta, _, _, _ := drain(t, e)
	if !strings.Contains(meta, `"agentId": "sup"`) || !strings.Contains(meta, `"code":7`) {
		t.Fatalf("persisted state: %q", meta)
	}
}

// TestSupervisedTimeoutKillsSetsidChild is the kill-tree case of README, "The in-container supervisor": a 1 s
// timeout ends the whole tree, including a child that called setsid.
func TestSupervisedTimeoutKillsSetsidChild(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "proof"}
	st := startCmd(t, m, s, `(setsid sh -c 'sleep 3; touch /tmp/PROOF') & sleep 30`, nil)
	p := mustSupervised(t, st)
	time.Sleep(time.Second) // the timeout
	if err := p.Kill(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	_, _, code, sig := drain(t, p)
	if code != -1 || sig == "" {
		t.Fatalf("killed command: code %d signal %q", code, sig)
	}
	// Every process but docker-init, the supervisor and this inspection
	// (its shell and the shell's children) is a stray; once none is left,
	// nothing can touch the proof any more.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := run(t, m, s, `ls /tmp/PROOF 2>/dev/null || echo ABSENT; ps -o pid,ppid,args > /tmp/ps.txt; grep -v -e docker-init -e `+SupervisorPath+` -e PID /tmp/ps.txt | awk -v me=$$ '$1 != me && $2 != me'`)
		if strings.TrimSpace(out) == "ABSENT" {
			break
		}
		if strings.Contains(out, "/tmp/PROOF") || time.Now().After(deadline) {
			t.Fatalf("after the kill: %q (want no PROOF and no stray process)", out)
		}
	}
}

// TestSupervisedSpareLauncher: once a command ran, the supervisor keeps a
// spare launcher (supervisor.SpareLaunchArg) for the next one: a child of
// pid 1 with the commands' OOM score, non-dumpable while it waits (no
// other process of the sandbox opens its descriptors). It outlives the
// end of the session that listed it (the sweep of orphans spares it), the
// next commands are forked as pid 1's children, dumpable again, and it
// stays, the same process, for the ones after.
func TestSupervisedSpareLauncher(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "spare"}
	// Through the supervisor (Run takes the Engine's exec path).
	sup := func(script string) string {
		t.Helper()
		out, errs, code, _ := drain(t, mustSupervised(t, startCmd(t, m, s, script, nil)))
		if code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", script, code, errs)
		}
		return out
	}
	// The spare is started a moment after the first command: this one
	// waits (5 s at most) until it is there and has raised its score and
	// made itself non-dumpable, and prints it (pid, parent,
	// oom_score_adj, whether its fds can be opened).
	list := `for i in $(seq 100); do seen=; for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" = "` + SupervisorPath + ` ` + supervisor.SpareLaunchArg + ` " ] && ` +
		`seen="$seen$(basename $p) $(awk '{print $4}' $p/stat) $(cat $p/oom_score_adj) $(ls $p/fd >/dev/null 2>&1 && echo readable || echo denied) "; done; ` +
		`case "$seen" in *" 1000 denied ") break;; esac; sleep 0.05; done; echo "$seen"`
	seen := sup(list)
	f := strings.Fields(seen)
	if len(f) != 4 || f[1] != "1" || f[2] != "1000" || f[3] != "denied" {
		t.Fatalf("the waiting spare (pid, parent, oom_score_adj, its fds): %q", seen)
	}
	time.Sleep(200 * time.Millisecond) // its runtime's start, before it reports ready
	// The commands it forks are the supervisor's children, with the
	// raised score, dumpable once they exec; it stays for the next.
	for range 3 {
		if next := sup(`echo $PPID $(cat /proc/self/oom_score_adj); ls /proc/self/fd >/dev/null && echo dumpable`); next != "1 1000\ndumpable\n" {
			t.Fatalf("a command after the spare %s was ready: %q", f[0], next)
		}
	}
	if again := sup(list); again != seen {
		t.Fatalf("the spare %q was replaced by %q; processes:\n%s", seen, again, sup(`ps -o pid,ppid,user,args`))
	}
}

func TestSupervised32Concurrent(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "conc"}
	mustSupervised(t, startCmd(t, m, s, "true", nil)) // warm
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := m.Start(ctxT(t), s, ExecOptions{Cmd: []string{"sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i%4)}})
			if err != nil {
				errs <- err
				return
			}
			if _, ok := st.Process.(*SupervisedExec); !ok {
				errs <- fmt.Errorf("cmd %d on the plain path: %q", i, st.Warnings)
				return
			}
			out, _ := io.ReadAll(st.Stdout())
			_, _ = io.ReadAll(st.Stderr())
			code, _, err := st.Wait(ctxT(t))
			if err != nil || code != i%4 || string(out) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("cmd %d: out %q code %d err %v", i, out, code, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One connection served them all.
	m.first().clients.mu.Lock()
	n := len(m.first().clients.entries)
	m.first().clients.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d supervisor connections, want 1", n)
	}
}

func TestSupervisedStdinPTYAndResize(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "io"}
	st := startCmd(t, m, s, "cat; echo END", func(o *ExecOptions) { o.KeepStdin = true })
	p := mustSupervised(t, st)
	if _, err := p.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if out, _, code, _ := drain(t, p); out != "hello\nEND\n" || code != 0 {
		t.Fatalf("stdin: %q %d", out, code)
	}

	st = startCmd(t, m, s, "stty size; tty >/dev/null && echo ISTTY; read x; stty size", func(o *ExecOptions) {
		o.PTY, o.KeepStdin, o.Cols, o.Rows = true, true, 120, 30
	})
	p = mustSupervised(t, st)
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := p.Stdout().Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(buf.String(), "ISTTY") })
	if err := p.Resize(ctxT(t), 100, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("x\r")); err != nil {
		t.Fatal(err)
	}
	<-done
	code, _, _ := p.Wait(ctxT(t))
	if got := buf.String(); !strings.Contains(got, "30 120") || !strings.Contains(got, "40 100") || code != 0 {
		t.Fatalf("pty: %q code %d", got, code)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSupervisedReconnect(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "recon"}
	st := startCmd(t, m, s, `i=0; while [ $i -lt 40 ]; do echo line$i; i=$((i+1)); sleep 0.02; done`, nil)
	p := mustSupervised(t, st)
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.Stdout()); got <- string(b) }()
	time.Sleep(200 * time.Millisecond)
	cl, err := m.first().supervisorClient(ctxT(t), st.Ensure.ID)
	if err != nil {
		t.Fatal(err)
	}
	cl.CloseConn() // the connection breaks mid-run
	time.Sleep(150 * time.Millisecond)
	cl.CloseConn()
	out := <-got
	var want strings.Builder
	for i := range 40 {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if out != want.String() {
		t.Fatalf("output across reconnects:\n%q\nwant\n%q", out, want.String())
	}
	if code, _, err := p.Wait(ctxT(t)); code != 0 || err != nil {
		t.Fatalf("code %d err %v", code, err)
	}
}

// TestSupervisedDurableSessions: a second Manager (a restarted daemon) sees
// the finished and running sessions of the first, with output and exit
// codes, and follows the running one to its end.
func TestSupervisedDurableSessions(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "durable", SessionKey: "k1"}
	fin := mustSupervised(t, startCmd(t, m, s, "echo finished-output; exit 3", func(o *ExecOptions) { o.Meta = map[string]string{"sessionId": "brisk-otter"} }))
	drain(t, fin)
	bg := mustSupervised(t, startCmd(t, m, s, "echo started; sleep 3; echo persisted", func(o *ExecOptions) { o.Meta = map[string]string{"sessionId": "calm-heron"} }))
	b := make([]byte, 8)
	if _, err := io.ReadFull(bg.Stdout(), b); err != nil {
		t.Fatal(err)
	}

	m2, err := NewManager(context.Background(), Options{Config: m.cfg, StateDir: m.first().stateDir, Home: "/nonexistent", Labels: m.first().labels, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Close() })
	m2.first().wsRoot = m.first().wsRoot
	sessions, err := m2.Sessions(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 2 {
		t.Fatalf("want 2 sessions, got %+v", sessions)
	}
	f, r := sessions[0], sessions[1]
	if f.ID != fin.ID() || f.Running || f.ExitCode == nil || *f.ExitCode != 3 || string(f.Output) != "finished-output\n" ||
		f.Meta["sessionId"] != "brisk-otter" || f.AgentID != "durable" || f.SessionKey != "k1" {
		t.Fatalf("finished session: %+v output %q", f, f.Output)
	}
	if r.ID != bg.ID() || !r.Running || string(r.Output) != "started\n" || r.Meta["sessionId"] != "calm-heron" {
		t.Fatalf("running session: %+v output %q", r, r.Output)
	}
	p, err := m2.Reattach(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	out, _, code, _ := drain(t, p)
	if out != "persisted\n" || code != 0 {
		t.Fatalf("reattached: %q code %d", out, code)
	}
	// The first daemon's connection was taken over.
	if _, _, err := bg.Wait(ctxT(t)); err == nil {
		t.Log("old connection saw the exit before the takeover")
	}
	// Finished sessions stay listed with their logs until forgotten.
	again, err := m2.Sessions(ctxT(t))
	if err != nil || len(again) != 2 || again[1].ExitCode == nil || *again[1].ExitCode != 0 || string(again[1].Output) != "started\npersisted\n" {
		t.Fatalf("after exit: %+v %v", again, err)
	}
	if err := m2.ForgetSession(ctxT(t), f.ContainerID, f.ID); err != nil {
		t.Fatal(err)
	}
	if left, _ := m2.Sessions(ctxT(t)); len(left) != 1 {
		t.Fatalf("after forget: %+v", left)
	}
}

func TestSupervisedInputWait(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "iw"}
	mustSupervised(t, startCmd(t, m, s, "true", nil))
	start := time.Now()
	st := startCmd(t, m, s, `read x; echo "got $x"`, func(o *ExecOptions) { o.KeepStdin = true })
	p := mustSupervised(t, st)
	select {
	case <-p.InputWaitChanged():
	case <-time.After(20 * time.Second):
		t.Fatal("input wait not reported")
	}
	if !p.InputWait() {
		t.Fatal("InputWait false after change")
	}
	t.Logf("input wait reported after %s", time.Since(start))
	if _, err := p.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	_ = p.CloseStdin()
	if out, _, code, _ := drain(t, p); out != "got yes\n" || code != 0 {
		t.Fatalf("after input: %q %d", out, code)
	}
}

func TestSupervisorFallbackWithoutBinary(t *testing.T) {
	m := newManagerOpts(t, func(o *Options) { o.SupervisorBinary = filepath.Join(t.TempDir(), "missing") })
	st := startCmd(t, m, Scope{AgentID: "fb"}, "echo plain", nil)
	if _, ok := st.Process.(*Exec); !ok {
		t.Fatalf("want the plain path, got %T", st.Process)
	}
	if len(st.Warnings) == 0 || !strings.Contains(st.Warnings[0], "supervisor") {
		t.Fatalf("want a supervisor warning, got %q", st.Warnings)
	}
	if out, _, code, _ := drain(t, st.Process); out != "plain\n" || code != 0 {
		t.Fatalf("plain: %q %d", out, code)
	}
	// DisableSupervisor: the plain path on purpose, no warning.
	m2 := newManagerOpts(t, func(o *Options) { o.DisableSupervisor = true })
	st = startCmd(t, m2, Scope{AgentID: "fb"}, "echo plain", nil)
	if _, ok := st.Process.(*Exec); !ok || len(st.Warnings) != 0 {
		t.Fatalf("disabled: %T %q", st.Process, st.Warnings)
	}
	drain(t, st.Process)
}

func TestSupervisorFallbackUnusableImage(t *testing.T) {
	// A binary for another architecture stands in for an image the
	// supervisor cannot run in: the sandbox is created on the plain path and
	// every result says so.
	bin, err := os.ReadFile(supervisorBinPath)
	if err != nil {
		t.Skip("no supervisor binary")
	}
	// Patch e_machine (offset 18) to aarch64 (183) or x86-64 (62).
	other := append([]byte(nil), bin...)
	if other[18] == 62 {
		other[18], other[19] = 183, 0
	} else {
		other[18], other[19] = 62, 0
	}
	path := filepath.Join(t.TempDir(), SupervisorBinaryName)
	if err := os.WriteFile(path, other, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManagerOpts(t, func(o *Options) { o.SupervisorBinary = path })
	st := startCmd(t, m, Scope{AgentID: "arch"}, "echo fine", nil)
	if _, ok := st.Process.(*Exec); !ok {
		t.Fatalf("want the plain path, got %T", st.Process)
	}
	if len(st.Warnings) == 0 || !strings.Contains(st.Warnings[0], "without the supervisor") {
		t.Fatalf("warnings %q", st.Warnings)
	}
	if out, _, _, _ := drain(t, st.Process); out != "fine\n" {
		t.Fatalf("out %q", out)
	}
}

var _ Process = (*SupervisedExec)(nil)
var _ Process = (*Exec)(nil)

func clientInspect() client.ContainerInspectOptions { return client.ContainerInspectOptions{} }

// TestHelperDaemon is not a test: TestSupervisedSurvivesDaemonSIGKILL runs
// the test binary with it as a stand-in daemon that starts commands and is
// then killed with SIGKILL.
func TestHelperDaemon(t *testing.T) {
	if os.Getenv("SANDBOXCTL_HELPER_DAEMON") == "" {
		t.Skip("helper process only")
	}
	// It never returns to TestMain, whose sweep would remove the parent's
	// containers.
	fail := func(err error) {
		fmt.Println("ERROR", err)
		os.Exit(3)
	}
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv("SANDBOXCTL_HELPER_CONFIG")), &cfg); err != nil {
		fail(err)
	}
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: os.Getenv("SANDBOXCTL_HELPER_STATE"), Home: os.TempDir(),
		Labels: testLabels(testLabel+".prefix", cfg.Docker.ContainerPrefix)})
	if err != nil {
		fail(err)
	}
	s := Scope{AgentID: "killed"}
	fin, err := m.Start(context.Background(), s, ExecOptions{Cmd: []string{"sh", "-c", "echo done-before; exit 4"}, Meta: map[string]string{"sessionId": "finished-one"}})
	if err != nil {
		fail(err)
	}
	_, _ = io.Copy(io.Discard, fin.Stdout())
	_, _, _ = fin.Wait(context.Background())
	bg, err := m.Start(context.Background(), s, ExecOptions{Cmd: []string{"sh", "-c", "sleep 3; echo persisted"}, Meta: map[string]string{"sessionId": "background-one"}})
	if err != nil {
		fail(err)
	}
	fmt.Printf("READY %s %s\n", fin.Tag(), bg.Tag())
	time.Sleep(time.Minute) // killed long before
	os.Exit(0)
}

// TestSupervisedSurvivesDaemonSIGKILL: a daemon process is killed with
// SIGKILL while a background `sleep 3; echo persisted` runs; a new Manager
// (the restarted daemon) finds it running, follows it to `persisted` and
// exit code 0, and still lists the finished session with its output.
func TestSupervisedSurvivesDaemonSIGKILL(t *testing.T) {
	m := newTestManager(t, nil)
	cfgJSON, _ := json.Marshal(m.cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDaemon$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDBOXCTL_HELPER_DAEMON=1", "SANDBOXCTL_HELPER_CONFIG="+string(cfgJSON), "SANDBOXCTL_HELPER_STATE="+m.first().stateDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var finID, bgID string
	lines := make(chan string)
	go func() {
		b := make([]byte, 0, 4096)
		buf := make([]byte, 512)
		for {
			n, err := out.Read(buf)
			b = append(b, buf[:n]...)
			for {
				i := bytes.IndexByte(b, '\n')
				if i < 0 {
					break
				}
				lines <- string(b[:i])
				b = b[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("helper daemon ended before it was ready")
			}
			if f := strings.Fields(l); len(f) == 3 && f[0] == "READY" {
				finID, bgID = f[1], f[2]
				break wait
			}
		case <-deadline:
			t.Fatal("helper daemon not ready")
		}
	}
	go func() {
		for range lines {
		}
	}()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// The restarted daemon.
	m2, err := NewManager(context.Background(), Options{Config: m.cfg, StateDir: m.first().stateDir, Home: t.TempDir(), Labels: m.first().labels, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Close() })
	sessions, err := m2.Sessions(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]RecoveredSession{}
	for _, s := range sessions {
		byID[s.ID] = s
	}
	fin, bg := byID[finID], byID[bgID]
	if fin.ExitCode == nil || *fin.ExitCode != 4 || string(fin.Output) != "done-before\n" || fin.Meta["sessionId"] != "finished-one" {
		t.Fatalf("finished session after SIGKILL: %+v output %q", fin, fin.Output)
	}
	if !bg.Running || bg.Meta["sessionId"] != "background-one" || bg.AgentID != "killed" {
		t.Fatalf("background session after SIGKILL: %+v", bg)
	}
	p, err := m2.Reattach(ctxT(t), bg)
	if err != nil {
		t.Fatal(err)
	}
	got, _, code, sig := drain(t, p)
	if got != "persisted\n" || code != 0 || sig != "" {
		t.Fatalf("after SIGKILL of the daemon: output %q code %d signal %q", got, code, sig)
	}
}
