package sessions_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/hosttest"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// newGatewayRunner builds a Runner over a small controlled environment, so
// the tests neither depend on nor leak the test runner's own.
func newGatewayRunner(t *testing.T) *hostexec.Runner {
	t.Helper()
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{
		Shell:   "/bin/sh",
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"},
		Logf:    t.Logf,
	})
	if err != nil {
		t.Fatalf("hostexec.NewRunner: %v", err)
	}
	return r
}

// newGatewayManager wires a Manager whose configured host is the gateway,
// with security full and ask off (no guard needed).
func newGatewayManager(t *testing.T, defaultCwd string) *sessions.Manager {
	t.Helper()
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	return newSingleHostManager(t, cfg, "gateway", sessions.NewGatewayHost(newGatewayRunner(t), defaultCwd))
}

// newSingleHostManager returns a Manager with one host under name, closed
// (every session killed) at the end of the test; cursorFile is
// Options.CursorFile.
func newSingleHostManager(t *testing.T, cfg config.File, name vocab.Host, host sessions.Host, cursorFile ...string) *sessions.Manager {
	t.Helper()
	m, err := sessions.New(sessions.Options{
		Config:     cfg,
		Hosts:      map[vocab.Host]sessions.Host{name: host},
		Logf:       t.Logf,
		Getenv:     func(string) string { return "" },
		CursorFile: strings.Join(cursorFile, ""),
	})
	if err != nil {
		t.Fatalf("sessions.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	return m
}

func TestGatewayConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance suite runs real processes for ~10 s")
	}
	hosttest.Run(t, func(t *testing.T) hosttest.Target {
		scratch := t.TempDir()
		return hosttest.Target{
			Tools:      newGatewayManager(t, scratch),
			Host:       "gateway",
			AgentID:    "agent-conformance",
			SessionKey: "session-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Scratch:    scratch,
			Inspect: func(ctx context.Context, command string) (string, error) {
				out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput()
				return string(out), err
			},
		}
	})
}

func TestGatewayHostWorkdir(t *testing.T) {
	def := t.TempDir()
	sub := def + "/sub"
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sessions.NewGatewayHost(newGatewayRunner(t), def)
	for _, tc := range []struct {
		requested, want string
		warn            bool
	}{
		{"", def, false},
		{"sub", sub, false},
		{sub, sub, false},
		{def + "/missing", def, true},
	} {
		dir, warning, err := h.ResolveWorkdir(context.Background(), "a", "s", tc.requested)
		if err != nil || dir != tc.want || (warning != "") != tc.warn {
			t.Errorf("ResolveWorkdir(%q) = %q, %q, %v; want %q (warning %v)", tc.requested, dir, warning, err, tc.want, tc.warn)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if dir, _, _ := sessions.NewGatewayHost(newGatewayRunner(t), "").ResolveWorkdir(context.Background(), "", "", ""); dir != wd {
		t.Errorf("empty default cwd resolves to %q, want the process cwd %q", dir, wd)
	}
}

func TestGatewayHostStart(t *testing.T) {
	h := sessions.NewGatewayHost(newGatewayRunner(t), t.TempDir())
	tags := map[string]bool{}
	for range 2 {
		p, err := h.Start(context.Background(), sessions.StartSpec{
			Command: `printf '%s' "$SANDBOXCTL_RUN"`, Env: map[string]string{"X": "1"},
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		hp, ok := p.Process.(*hostexec.Process)
		if !ok {
			t.Fatalf("Start returned %T, want *hostexec.Process", p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		buf := new(strings.Builder)
		done := make(chan struct{})
		go func() {
			defer close(done)
			b := make([]byte, 256)
			for {
				n, err := p.Stdout().Read(b)
				buf.Write(b[:n])
				if err != nil {
					return
				}
			}
		}()
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		if code, sig, err := p.Wait(ctx); code != 0 || sig != "" || err != nil {
			t.Errorf("Wait = %d %q %v", code, sig, err)
		}
		<-done
		if err := p.Kill(ctx); err != nil {
			t.Errorf("Kill after exit: %v", err)
		}
		cancel()
		if buf.String() != hp.Tag() || len(hp.Tag()) != 16 || tags[hp.Tag()] {
			t.Errorf("tag %q (printed %q): want a fresh 16-hex tag per run", hp.Tag(), buf.String())
		}
		tags[hp.Tag()] = true
	}
	if _, err := h.Start(context.Background(), sessions.StartSpec{Command: "true", Env: map[string]string{"PATH": "/x"}}); err == nil {
		t.Error("Start with a PATH override succeeded")
	}
}

// TestSupervisedGatewayConformance runs the conformance suite on the
// gateway host whose commands run in a host supervisor (a real `sandboxctld
// serve host-supervisor` process, as the daemon starts it).
func TestSupervisedGatewayConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance suite runs real processes for ~10 s")
	}
	bins, err := testbuild.Build(t.TempDir(), "sandboxctld")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "host-supervisor")
	// newSup is the daemon's link to the host supervisor; each daemon
	// (each restart) has its own. A restarted daemon's predecessor is not
	// stopped (it "died"), so its link lives on past its test and must not
	// log into it.
	newSup := func(t *testing.T) *hostsup.Supervisor {
		sup, err := hostsup.New(hostsup.Options{
			Dir: dir, Command: []string{bins[0], "serve", "host-supervisor", "--dir", dir},
			Env: []string{"PATH=/usr/bin:/bin"}, Logf: logfWhileRunning(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		return sup
	}
	sup := newSup(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := newSup(t).Stop(ctx); err != nil {
			t.Errorf("stop the host supervisor: %v", err)
		}
	})
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	hosttest.Run(t, func(t *testing.T) hosttest.Target {
		scratch := t.TempDir()
		cursors := filepath.Join(t.TempDir(), "cursors.json") // the daemon's, kept across its restart
		return hosttest.Target{
			Restart: func(t *testing.T) hosttest.Tools {
				m := newSingleHostManager(t, cfg, "gateway", sessions.NewSupervisedGatewayHost(newGatewayRunner(t), scratch, newSup(t)), cursors)
				if _, err := m.Recover(context.Background()); err != nil {
					t.Fatalf("Recover: %v", err)
				}
				return m
			},
			Tools:      newSingleHostManager(t, cfg, "gateway", sessions.NewSupervisedGatewayHost(newGatewayRunner(t), scratch, sup), cursors),
			Host:       "gateway",
			AgentID:    "agent-conformance",
			SessionKey: "session-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Scratch:    scratch,
			Inspect: func(ctx context.Context, command string) (string, error) {
				out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput()
				return string(out), err
			},
		}
	})
}

// logfWhileRunning is t.Logf until t's cleanup runs, then nothing: for the
// log of something a test leaves running on purpose (testing forbids
// logging into a finished test).
func logfWhileRunning(t *testing.T) func(string, ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf(format, args...)
		}
	}
}
