package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sibling builds a second Manager on m's containers (same prefix, labels,
// state and workspace) with a changed config.
func sibling(t *testing.T, m *Manager, mutate func(*Config), now func() time.Time) *Manager {
	t.Helper()
	cfg := m.cfg
	cfg.Docker.Env = map[string]string{}
	for k, v := range m.cfg.Docker.Env {
		cfg.Docker.Env[k] = v
	}
	mutate(&cfg)
	m2, err := NewManager(context.Background(), Options{Config: cfg, StateDir: m.first().stateDir, Home: "/nonexistent", Labels: m.first().labels, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	m2.first().wsRoot = m.first().wsRoot
	t.Cleanup(func() { _ = m2.Close() })
	return m2
}

func run(t *testing.T, m *Manager, s Scope, script string) (string, int) {
	t.Helper()
	out, code, err := m.Run(ctxT(t), s, []string{"sh", "-c", script})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return out, code
}

func TestEnsureReuseRecreateAndScopes(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := ctxT(t)
	a := Scope{AgentID: "alpha"}

	out, code := run(t, m, a, "echo hello from $(hostname)")
	if code != 0 || !strings.Contains(out, "hello from") {
		t.Fatalf("first command: code %d out %q", code, out)
	}
	first, err := m.Ensure(ctx, a)
	if err != nil || first.Created {
		t.Fatalf("second ensure should reuse: %+v %v", first, err)
	}
	again, _ := m.Ensure(ctx, a)
	if again.ID != first.ID {
		t.Fatalf("reuse gave a different container: %s vs %s", again.ID, first.ID)
	}

	// Two agents, two containers.
	b, err := m.Ensure(ctx, Scope{AgentID: "beta"})
	if err != nil || b.ID == first.ID || b.Name == first.Name {
		t.Fatalf("agent beta shares alpha's container: %+v %v", b, err)
	}

	// Changed config, used just now: kept, recreate pending.
	changed := sibling(t, m, func(c *Config) { c.Docker.Env["MODE"] = "two" }, nil)
	pend, err := changed.Ensure(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if !pend.RecreatePending || pend.ID != first.ID || !strings.Contains(pend.PendingReason, "config changed") {
		t.Fatalf("want pending recreate on the same container, got %+v", pend)
	}
	ex, err := changed.Explain(ctx, a)
	if err != nil || !strings.HasPrefix(ex.Recreate, "pending") || !strings.Contains(ex.Recreate, "docker.env") {
		t.Fatalf("explain = %q, %v", ex.Recreate, err)
	}

	// Changed config, last used over five minutes ago: recreated.
	later := sibling(t, m, func(c *Config) { c.Docker.Env["MODE"] = "two" }, func() time.Time { return time.Now().Add(6 * time.Minute) })
	rec, err := later.Ensure(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Recreated || rec.ID == first.ID {
		t.Fatalf("want a recreated container, got %+v", rec)
	}
	out, _ = run(t, later, a, "echo $MODE")
	if strings.TrimSpace(out) != "two" {
		t.Fatalf("recreated container env MODE = %q", out)
	}

	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("want 2 managed containers (alpha, beta), got %d: %+v", len(list), list)
	}
}

func TestConcurrentEnsureCreatesOne(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := ctxT(t)
	// A second Manager on the same scope stands in for another process.
	other := sibling(t, m, func(*Config) {}, nil)
	var wg sync.WaitGroup
	ids := make([]string, 10)
	errs := make([]error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mgr := m
			if i%2 == 1 {
				mgr = other
			}
			r, err := mgr.Ensure(ctx, Scope{AgentID: "crowd"})
			ids[i], errs[i] = r.ID, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ensure %d: %v", i, err)
		}
		if ids[i] != ids[0] {
			t.Fatalf("ensure %d got %s, ensure 0 got %s", i, ids[i], ids[0])
		}
	}
	list, _ := m.List(ctx)
	if len(list) != 1 {
		t.Fatalf("10 concurrent ensures made %d containers", len(list))
	}
}

func TestHardeningInside(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.PidsLimit = 64 })
	s := Scope{AgentID: "hard"}
	t.Setenv("SANDBOXCTL_HOST_LEAK", "leaked")
	checks := []struct {
		name, script, want string
	}{
		// An Engine exec's bounding set is the container's (with a
		// sandbox identity, the supervisor's few); it holds none of them.
		{"capabilities zero", "grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status | awk '{print $2}' | sort -u", "0000000000000000"},
		{"root read-only", "touch /rootfile 2>/dev/null || echo REFUSED", "REFUSED"},
		{"tmp writable", "echo x > /tmp/ok && cat /tmp/ok", "x"},
		{"var tmp writable", "echo y > /var/tmp/ok && cat /var/tmp/ok", "y"},
		{"no network", "ls /sys/class/net | tr '\\n' ' '", "lo"},
		{"no new privileges", "grep NoNewPrivs /proc/self/status | awk '{print $2}'", "1"},
		{"supervisor is pid 1", "cat /proc/1/cmdline | tr '\\0' ' ' | cut -d' ' -f1", SupervisorPath},
		{"env not inherited", "env | grep -c SANDBOXCTL_HOST_LEAK || true", "0"},
		{"lang set", "echo $LANG", "C.UTF-8"},
		{"workdir", "pwd", "/workspace"},
		{"workspace writable", "echo w > /workspace/w && cat /workspace/w", "w"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			out, _ := run(t, m, s, c.script)
			if strings.TrimSpace(out) != c.want {
				t.Fatalf("%s: got %q, want %q", c.script, strings.TrimSpace(out), c.want)
			}
		})
	}
	t.Run("supervised command: no capability, empty bounding set", func(t *testing.T) {
		st := startCmd(t, m, s, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status | awk '{print $2}' | sort -u", nil)
		out, errs, code, _ := drain(t, mustSupervised(t, st))
		if code != 0 || strings.TrimSpace(out) != "0000000000000000" {
			t.Fatalf("capabilities of a supervised command: code %d out %q err %q", code, out, errs)
		}
	})
	t.Run("pids limit contains a fork bomb", func(t *testing.T) {
		// The bomb's shell dies when fork fails; the outer shell then counts
		// processes with builtins only (no fork needed).
		out, _ := run(t, m, s, `sh -c 'i=0; while [ $i -lt 200 ]; do sleep 3 & i=$((i+1)); done' 2>/dev/null; set -- /proc/[0-9]*; echo $#`)
		var n int
		fmt.Sscanf(strings.TrimSpace(out), "%d", &n)
		if n == 0 || n > 64 {
			t.Fatalf("processes after fork bomb = %q; want >0 and <= pids limit 64", out)
		}
		// The sandbox works again once the bomb's sleeps end.
		deadline := time.Now().Add(15 * time.Second)
		for {
			out, code, err := m.Run(ctxT(t), s, []string{"echo", "alive"})
			if err == nil && code == 0 && out == "alive\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox dead after fork bomb: %q %d %v", out, code, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

func TestBindAndConfigRefusals(t *testing.T) {
	requireDocker(t)
	tmp := t.TempDir()
	link := filepath.Join(tmp, "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	okDir := t.TempDir()
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"docker.sock", func(c *Config) { c.Docker.Binds = []string{"/var/run/docker.sock:/var/run/docker.sock"} }, "Docker socket"},
		{"etc", func(c *Config) { c.Docker.Binds = []string{"/etc:/host/etc:ro"} }, "/etc"},
		{"run dotdot etc", func(c *Config) { c.Docker.Binds = []string{"/run/../etc:/x"} }, "/etc"},
		{"symlink to etc", func(c *Config) { c.Docker.Binds = []string{link + ":/x"} }, "resolves to /etc"},
		{"symlink child", func(c *Config) { c.Docker.Binds = []string{link + "/ssl:/x"} }, "resolves to /etc/ssl"},
		{"root", func(c *Config) { c.Docker.Binds = []string{"/:/host"} }, "host root"},
		{"proc", func(c *Config) { c.Docker.Binds = []string{"/proc/1:/x"} }, "/proc"},
		{"relative", func(c *Config) { c.Docker.Binds = []string{"data:/data"} }, "absolute"},
		{"reserved workspace", func(c *Config) { c.Docker.Binds = []string{okDir + ":/workspace/x"} }, "reserved"},
		{"reserved agent", func(c *Config) { c.Docker.Binds = []string{okDir + ":/agent"} }, "reserved"},
		{"bad mode", func(c *Config) { c.Docker.Binds = []string{okDir + ":/data:rx"} }, "mode"},
		{"outside allowed roots", func(c *Config) {
			c.AllowedSourceRoots = []string{tmp}
			c.Docker.Binds = []string{okDir + ":/data"}
		}, "allowedSourceRoots"},
		{"network host", func(c *Config) { c.Docker.Network = "host" }, "network host"},
		{"network container", func(c *Config) { c.Docker.Network = "container:abc" }, "another container"},
		{"seccomp unconfined", func(c *Config) { c.Docker.SeccompProfile = "unconfined" }, "unconfined"},
		{"apparmor unconfined", func(c *Config) { c.Docker.ApparmorProfile = "Unconfined" }, "unconfined"},
		{"api key env", func(c *Config) { c.Docker.Env = map[string]string{"FOO_API_KEY": "x"} }, "FOO_API_KEY"},
		{"token env", func(c *Config) { c.Docker.Env = map[string]string{"GITHUB_TOKEN": "x"} }, "GITHUB_TOKEN"},
	}
	prefix := "sbxt-refuse-" + randHex(3) + "-"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Docker.Image = testImage
			cfg.Docker.ContainerPrefix = prefix
			cfg.WorkspaceRoot = t.TempDir()
			tt.mutate(&cfg)
			_, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: "/"})
			if err == nil {
				t.Fatal("config accepted")
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
	// Nothing was created by any refused config.
	good := newTestManager(t, func(c *Config) { c.Docker.ContainerPrefix = prefix })
	list, err := good.first().cli.ContainerList(ctxT(t), listAllWithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("refused configs left %d containers", len(list.Items))
	}
	// An allowed bind works and is mounted.
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("bound"), 0o644); err != nil {
		t.Fatal(err)
	}
	okm := newTestManager(t, func(c *Config) { c.Docker.Binds = []string{data + ":/data:ro"} })
	if out, _ := run(t, okm, Scope{AgentID: "b"}, "cat /data/f; touch /data/g 2>/dev/null || echo RO"); out != "bound"+"RO\n" {
		t.Fatalf("bind: %q", out)
	}
}

func TestWorkspaceAccessModes(t *testing.T) {
	for _, access := range []string{"rw", "ro", "none"} {
		t.Run(access, func(t *testing.T) {
			m := newTestManager(t, func(c *Config) { c.WorkspaceAccess = access })
			s := Scope{AgentID: "ws"}
			_, _, agentDir, _ := m.Layout(s)
			if err := os.MkdirAll(agentDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(agentDir, "hostfile"), []byte("h"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := run(t, m, s, "ls /workspace; echo --; ls /agent 2>/dev/null; echo --; touch /agent/x 2>/dev/null && echo AGENTRW; touch /workspace/new && echo WSRW")
			want := map[string]string{
				"rw":   "hostfile\n--\n--\nWSRW\n",
				"ro":   "--\nhostfile\n--\nWSRW\n",
				"none": "--\n--\nWSRW\n",
			}[access]
			if out != want {
				t.Fatalf("access %s: got %q want %q", access, out, want)
			}
			_, statErr := os.Stat(filepath.Join(agentDir, "new"))
			if (access == "rw") != (statErr == nil) {
				t.Fatalf("access %s: /workspace/new on host agent dir: %v", access, statErr)
			}
		})
	}
}

func TestExecPlainPath(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := ctxT(t)
	res, err := m.Ensure(ctx, Scope{AgentID: "exec"})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("stdout stderr exit code", func(t *testing.T) {
		e, err := m.ExecIn(ctx, res.ID, ExecOptions{Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}})
		if err != nil {
			t.Fatal(err)
		}
		var errOut []byte
		done := make(chan struct{})
		go func() { errOut, _ = io.ReadAll(e.Stderr()); close(done) }()
		out, _ := io.ReadAll(e.Stdout())
		<-done
		code, sig, err := e.Wait(ctx)
		if string(out) != "out\n" || string(errOut) != "err\n" || code != 7 || sig != "" || err != nil {
			t.Fatalf("out %q err %q code %d sig %q err %v", out, errOut, code, sig, err)
		}
	})
	t.Run("stdin with EOF", func(t *testing.T) {
		e, err := m.ExecIn(ctx, res.ID, ExecOptions{Cmd: []string{"sh", "-c", "cat; echo END"}, KeepStdin: true})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
		if _, err := e.Write([]byte("abc\n")); err != nil {
			t.Fatal(err)
		}
		if err := e.CloseStdin(); err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(e.Stdout())
		code, _, _ := e.Wait(ctx)
		if string(out) != "abc\nEND\n" || code != 0 {
			t.Fatalf("out %q code %d", out, code)
		}
	})
	t.Run("no stdin means EOF at once", func(t *testing.T) {
		start := time.Now()
		out, code, err := m.first().run(ctx, res.ID, []string{"cat"})
		if err != nil || code != 0 || out != "" || time.Since(start) > 10*time.Second {
			t.Fatalf("cat without stdin: %q %d %v after %s", out, code, err, time.Since(start))
		}
	})
	t.Run("tty size and resize", func(t *testing.T) {
		e, err := m.ExecIn(ctx, res.ID, ExecOptions{Cmd: []string{"sh", "-c", "stty size; tty; read x; stty size"}, PTY: true, KeepStdin: true})
		if err != nil {
			t.Fatal(err)
		}
		r := newLineReader(e.Stdout())
		if l := r.next(t); l != "30 120" {
			t.Fatalf("initial size %q", l)
		}
		if l := r.next(t); !strings.HasPrefix(l, "/dev/pts/") {
			t.Fatalf("tty %q", l)
		}
		if err := e.Resize(ctx, 100, 40); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Write([]byte("go\r")); err != nil {
			t.Fatal(err)
		}
		if l := r.next(t); l != "go" { // echo of the input line
			t.Fatalf("echo %q", l)
		}
		if l := r.next(t); l != "40 100" {
			t.Fatalf("size after resize %q", l)
		}
		if code, _, _ := e.Wait(ctx); code != 0 {
			t.Fatalf("code %d", code)
		}
	})
}

type lineReader struct {
	ch chan string
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{ch: make(chan string, 100)}
	go func() {
		defer close(lr.ch)
		var cur []byte
		buf := make([]byte, 1024)
		for {
			n, err := r.Read(buf)
			for _, b := range buf[:n] {
				switch b {
				case '\r':
				case '\n':
					lr.ch <- string(cur)
					cur = nil
				default:
					cur = append(cur, b)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return lr
}

func (lr *lineReader) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-lr.ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no line within 20s")
	}
	return ""
}

func TestKillEndsInContainerTree(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := ctxT(t)
	s := Scope{AgentID: "kill"}
	res, err := m.Ensure(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, script, proof string }{
		{"plain", "sleep 5 && touch /workspace/PROOF", "/workspace/PROOF"},
		{"setsid child", "(setsid sh -c 'sleep 3; touch /workspace/PROOF2') & sleep 30", "/workspace/PROOF2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := m.ExecIn(ctx, res.ID, ExecOptions{Cmd: []string{"sh", "-c", c.script}})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, e.Stdout()) }()
			go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
			time.Sleep(time.Second)
			if err := e.Kill(ctx); err != nil {
				t.Fatalf("kill: %v", err)
			}
			code, sig, err := e.Wait(ctx)
			if err != nil || code != -1 || sig == "" {
				t.Fatalf("wait after kill: code %d sig %q err %v", code, sig, err)
			}
			// Once no sleep is left, nothing can touch the proof any more.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				out, _ := run(t, m, s, "ps -o pid,args | grep -c '[s]leep [0-9]' || true")
				if strings.TrimSpace(out) == "0" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("stray sleep processes left 5 s after the kill: %q", out)
				}
			}
			if out, _ := run(t, m, s, "ls "+c.proof+" 2>/dev/null || true"); strings.Contains(out, c.proof) {
				t.Fatalf("%s exists: the in-container tree survived the kill", c.proof)
			}
		})
	}
}

func TestDockerUnreachableAndImageMissing(t *testing.T) {
	requireDocker(t)
	t.Run("unreachable", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
		cfg := DefaultConfig()
		m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir()})
		if err != nil {
			t.Fatalf("NewManager must not need the Engine: %v", err)
		}
		defer m.Close()
		for name, call := range map[string]func() error{
			"ensure":  func() error { _, err := m.Ensure(ctxT(t), Scope{}); return err },
			"list":    func() error { _, err := m.List(ctxT(t)); return err },
			"prune":   func() error { _, err := m.Prune(ctxT(t), true); return err },
			"explain": func() error { _, err := m.Explain(ctxT(t), Scope{}); return err },
			"remove":  func() error { return m.Remove(ctxT(t), Scope{}) },
			"ping":    func() error { return m.Ping(ctxT(t)) },
		} {
			err := call()
			if !errors.Is(err, ErrDockerUnreachable) || !strings.Contains(err.Error(), "Start it with") {
				t.Errorf("%s: err = %v; want ErrDockerUnreachable with how to start it", name, err)
			}
		}
	})
	t.Run("image missing", func(t *testing.T) {
		m := newTestManager(t, func(c *Config) { c.Docker.Image = "sandboxctl/does-not-exist:1" })
		_, err := m.Ensure(ctxT(t), Scope{AgentID: "x"})
		if !errors.Is(err, ErrImageMissing) || !strings.Contains(err.Error(), "make images") {
			t.Fatalf("err = %v; want ErrImageMissing saying how to build", err)
		}
		if list, _ := m.List(ctxT(t)); len(list) != 0 {
			t.Fatalf("a container was left: %+v", list)
		}
	})
}

func TestPruneAndRemove(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Prune = PruneConfig{IdleHours: 1, MaxAgeDays: 0} })
	ctx := ctxT(t)
	if _, err := m.Ensure(ctx, Scope{AgentID: "old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ensure(ctx, Scope{AgentID: "keep"}); err != nil {
		t.Fatal(err)
	}
	if pruned, err := m.Prune(ctx, false); err != nil || len(pruned) != 0 {
		t.Fatalf("fresh sandboxes pruned: %+v %v", pruned, err)
	}
	future := sibling(t, m, func(*Config) {}, func() time.Time { return time.Now().Add(2 * time.Hour) })
	// "keep" was used in the future manager's now; "old" was not.
	if _, err := future.Ensure(ctx, Scope{AgentID: "keep"}); err != nil {
		t.Fatal(err)
	}
	dry, err := future.Prune(ctx, true)
	if err != nil || len(dry) != 1 || dry[0].AgentID != "old" {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if list, _ := m.List(ctx); len(list) != 2 {
		t.Fatalf("dry run removed something: %d left", len(list))
	}
	if pruned, err := future.Prune(ctx, false); err != nil || len(pruned) != 1 {
		t.Fatalf("prune: %+v %v", pruned, err)
	}
	if err := m.Remove(ctx, Scope{AgentID: "keep"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, Scope{AgentID: "keep"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Fatalf("left: %+v", list)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		prefix, key, want string
	}{
		{"sandboxctl-", "agent:main", "sandboxctl-agent-main-"},
		{"sandboxctl-", "session:Foo Bar/Baz", "sandboxctl-session-foo-bar-baz-"},
		{"sandboxctl-", "agent:" + strings.Repeat("x", 80), "sandboxctl-agent-" + strings.Repeat("x", 26) + "-"},
		{strings.Repeat("p", 70), "shared", strings.Repeat("p", 54)},
	}
	for _, tt := range tests {
		n := ContainerName(tt.prefix, tt.key)
		if !strings.HasPrefix(n, tt.want) || len(n) > 63 {
			t.Errorf("ContainerName(%q, %q) = %q (%d chars), want prefix %q", tt.prefix, tt.key, n, len(n), tt.want)
		}
	}
	if ContainerName("p-", "agent:a") == ContainerName("p-", "agent:A") {
		t.Error("keys differing in case must not share a container")
	}
	scopes := []struct {
		mode string
		s    Scope
		want string
	}{
		{"agent", Scope{AgentID: "a", SessionKey: "s"}, "agent:a"},
		{"agent", Scope{}, "agent:default"},
		{"session", Scope{AgentID: "a", SessionKey: "s"}, `session:"a"/"s"`},
		{"session", Scope{SessionKey: "s"}, `session:"default"/"s"`},
		{"session", Scope{AgentID: "a"}, "agent:a"},
		{"shared", Scope{AgentID: "a", SessionKey: "s"}, "shared"},
	}
	for _, sc := range scopes {
		if got := ScopeKey(sc.mode, sc.s); got != sc.want {
			t.Errorf("ScopeKey(%s, %+v) = %q want %q", sc.mode, sc.s, got, sc.want)
		}
	}
}

// Two configurations on one Engine (two daemons, say): each lists, prunes
// and re-adopts only its own sandboxes, even with the same labels.
func TestListOnlyOwnPrefix(t *testing.T) {
	m1 := newTestManager(t, nil)
	m2 := newManagerOpts(t, func(o *Options) {
		o.Labels = m1.first().labels // the same labels, another containerPrefix
		o.DisableSupervisor = true
	})
	r1, err := m1.Ensure(ctxT(t), Scope{AgentID: "one"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m2.Ensure(ctxT(t), Scope{AgentID: "two"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m          *Manager
		own, other string
	}{{m1, r1.Name, r2.Name}, {m2, r2.Name, r1.Name}} {
		list, err := tc.m.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list {
			names = append(names, c.Name)
		}
		if len(names) != 1 || names[0] != tc.own {
			t.Errorf("List: %v, want only %s (not %s)", names, tc.own, tc.other)
		}
	}
}
