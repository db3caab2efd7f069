package sessions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

func TestExecBadInput(t *testing.T) {
	m, _ := newTestManager(t, func(c *config.File) { c.Exec.Host = "gateway"; c.Exec.Security = "full" })
	tests := []struct {
		name  string
		p     api.ExecParams
		field string
		msg   string
	}{
		{"missing command", api.ExecParams{}, "command", "Provide a command to start."},
		{"whitespace command", api.ExecParams{Command: " \t\n"}, "command", "Provide a command to start."},
		{"unknown host", api.ExecParams{Command: "true", Host: "mars"}, "host", `unknown host "mars"`},
		{"unknown security", api.ExecParams{Command: "true", Security: "yolo"}, "security", `unknown security "yolo"`},
		{"unknown ask", api.ExecParams{Command: "true", Ask: "sometimes"}, "ask", `unknown ask "sometimes"`},
		{"negative yield", api.ExecParams{Command: "true", YieldMs: ptr(-1.0)}, "yieldMs", "must not be negative"},
		{"NaN yield", api.ExecParams{Command: "true", YieldMs: ptr(math.NaN())}, "yieldMs", "finite number"},
		{"Inf timeout", api.ExecParams{Command: "true", Timeout: ptr(math.Inf(1))}, "timeout", "finite number"},
		{"negative timeout", api.ExecParams{Command: "true", Timeout: ptr(-5.0)}, "timeout", "must not be negative"},
		{"huge timeout", api.ExecParams{Command: "true", Timeout: ptr(1e12)}, "timeout", "at most 604800 seconds"},
		{"overflowing timeout", api.ExecParams{Command: "true", Timeout: ptr(1e300)}, "timeout", "at most 604800 seconds"},
		{"huge yield", api.ExecParams{Command: "true", YieldMs: ptr(1e15)}, "yieldMs", "at most 120000 ms"},
		{"yield above the window", api.ExecParams{Command: "true", YieldMs: ptr(120001.0)}, "yieldMs", "at most 120000 ms"},
		{"fractional yield", api.ExecParams{Command: "true", YieldMs: ptr(2.5)}, "yieldMs", "whole number"},
		{"other host", api.ExecParams{Command: "true", Host: "sandbox"}, "host", "configured exec host is \"gateway\""},
		{"invalid env key", api.ExecParams{Command: "true", Env: map[string]string{"1BAD": "x"}}, "env", "1BAD"},
		{"blocked env key", api.ExecParams{Command: "true", Env: map[string]string{"LD_PRELOAD": "/tmp/m.so"}}, "env", "LD_PRELOAD"},
		{"PATH override", api.ExecParams{Command: "true", Env: map[string]string{"PATH": "/tmp"}}, "env", "PATH"},
		{"override-only key", api.ExecParams{Command: "true", Env: map[string]string{"GIT_SSH_COMMAND": "evil.sh"}}, "env", "GIT_SSH_COMMAND"},
		{"NUL in command", api.ExecParams{Command: "echo \x00"}, "command", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := m.Exec(context.Background(), tt.p)
			if err == nil {
				t.Fatalf("want error, got result %q", text(r))
			}
			if !errors.Is(err, toolapi.ErrInvalidInput) || !toolapi.IsInvalidInput(err) {
				t.Fatalf("error %v does not match toolapi.ErrInvalidInput", err)
			}
			var ie *toolapi.InputError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("want toolapi.InputError on field %q, got %#v", tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
	// Nothing was started by any of them.
	if n := m.liveCount(); n != 0 {
		t.Fatalf("%d sessions started by bad input", n)
	}
	// envguard's typed refusal is reachable through the InputError.
	_, err := m.Exec(context.Background(), api.ExecParams{Command: "true", Env: map[string]string{"LD_PRELOAD": "x"}})
	var re *envguard.RefusedError
	if !errors.As(err, &re) || re.Key != "LD_PRELOAD" {
		t.Fatalf("want *envguard.RefusedError for LD_PRELOAD, got %v", err)
	}
}

func TestExecSandboxEnvNotBlocklisted(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "true", Env: map[string]string{"NODE_OPTIONS": "--x"}})
	if err != nil {
		t.Fatalf("sandbox env should pass: %v", err)
	}
	if r.Details.Status != api.StatusCompleted || hosts["sandbox"].lastSpec().Env["NODE_OPTIONS"] != "--x" {
		t.Fatalf("unexpected: %v %v", r.Details, hosts["sandbox"].lastSpec())
	}
}

func TestExecMissingHost(t *testing.T) {
	cfg := config.Default()
	m, err := New(Options{Config: cfg, Hosts: map[vocab.Host]Host{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	_, err = m.Exec(context.Background(), api.ExecParams{Command: "true"})
	if !errors.Is(err, ErrHostUnavailable) || !strings.Contains(err.Error(), `"sandbox"`) {
		t.Fatalf("want ErrHostUnavailable naming sandbox, got %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Exec.Security = "sometimes"
	if _, err := New(Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), "exec.security") {
		t.Fatalf("want error naming exec.security, got %v", err)
	}
}

func TestExecForegroundResults(t *testing.T) {
	tests := []struct {
		name     string
		run      func(p *fakeProc)
		status   string
		text     string
		exitCode api.ExitCode
		signal   string
	}{
		{"output", func(p *fakeProc) { p.say("hello\n"); p.exit(0, "") }, api.StatusCompleted, "hello\n", api.Code(0), ""},
		{"no output", func(p *fakeProc) { p.exit(0, "") }, api.StatusCompleted, "(no output)", api.Code(0), ""},
		{"non-zero", func(p *fakeProc) { p.say("oops\n"); p.exit(3, "") }, api.StatusCompleted, "oops\n\n(Command exited with code 3)", api.Code(3), ""},
		{"stderr", func(p *fakeProc) { p.sayErr("warn\n"); p.exit(1, "") }, api.StatusCompleted, "warn\n\n(Command exited with code 1)", api.Code(1), ""},
		{"signal", func(p *fakeProc) { p.say("x"); p.exit(-1, "SIGSEGV") }, api.StatusFailed, "x\n\n(Command failed: terminated by signal SIGSEGV)", api.NoExitCode(), "SIGSEGV"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, hosts := newTestManager(t, nil)
			p := newFakeProc(false)
			startWith(hosts["sandbox"], p)
			go tt.run(p)
			r, err := m.Exec(context.Background(), api.ExecParams{Command: "echo hi", Workdir: "/w"})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(r); got != tt.text {
				t.Errorf("text = %q, want %q", got, tt.text)
			}
			d := r.Details
			if d.Status != tt.status || d.ExitCode != tt.exitCode || d.Cwd != "/w" {
				t.Errorf("details = %v", d)
			}
			if d.DurationMs == nil {
				t.Errorf("durationMs missing: %v", d)
			}
			if tt.status == api.StatusFailed && (*d.Signal != tt.signal || d.Reason == "") {
				t.Errorf("failed details = %v", d)
			}
			// A foreground run that finished is not kept.
			if l := m.list(""); len(l.Details.Sessions) != 0 {
				t.Errorf("foreground session listed: %s", text(l))
			}
		})
	}
}

func TestExecStdinRule(t *testing.T) {
	tests := []struct {
		name string
		p    api.ExecParams
		keep bool
	}{
		{"foreground closes stdin", api.ExecParams{Command: "cat"}, false},
		{"background keeps", api.ExecParams{Command: "cat", Background: true}, true},
		{"explicit yield keeps", api.ExecParams{Command: "cat", YieldMs: ptr(10.0)}, true},
		{"pty keeps", api.ExecParams{Command: "cat", PTY: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, hosts := newTestManager(t, nil)
			_, err := m.Exec(context.Background(), tt.p)
			if err != nil {
				t.Fatal(err)
			}
			spec := hosts["sandbox"].lastSpec()
			if spec.KeepStdin != tt.keep {
				t.Fatalf("KeepStdin = %v, want %v", spec.KeepStdin, tt.keep)
			}
			if tt.p.PTY && (spec.Cols != 120 || spec.Rows != 30 || !spec.PTY) {
				t.Fatalf("pty spec = %+v", spec)
			}
		})
	}
}

func TestExecYieldThenBackground(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	startWith(hosts["sandbox"], p)
	p.say("first\n")
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 100", YieldMs: ptr(20.0), AgentID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Details
	id := d.SessionID
	if d.Status != api.StatusRunning || id == "" || *d.PID != p.pid || *d.Tail != "first\n" {
		t.Fatalf("running details = %v", d)
	}
	want := "Command still running (session " + id + ", pid "
	if !strings.HasPrefix(text(r), want) || !strings.HasSuffix(text(r), "Use process (list/poll/log/write/kill/clear/remove) for follow-up.") {
		t.Fatalf("text = %q", text(r))
	}
	if ok := d.StartedAt != 0; !ok {
		t.Fatalf("startedAt = %T", d.StartedAt)
	}
	// The run continues; poll sees the rest.
	pr, err := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a1", TimeoutMs: ptr(2000.0)})
	if err != nil {
		t.Fatal(err)
	}
	if text(pr) != "first\n\nProcess still running." {
		t.Fatalf("poll = %q", text(pr))
	}
	go func() { time.Sleep(30 * time.Millisecond); p.say("second\n") }()
	pr, _ = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a1", TimeoutMs: ptr(5000.0)})
	if text(pr) != "second\n\nProcess still running." {
		t.Fatalf("second poll = %q", text(pr))
	}
	p.exit(2, "")
	pr, _ = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a1", TimeoutMs: ptr(5000.0)})
	if text(pr) != "(no new output)\n\nProcess exited with code 2." || pr.Details.ExitCode != api.Code(2) {
		t.Fatalf("final poll = %q %v", text(pr), pr.Details)
	}
}

func TestExecBackgroundAtOnce(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	startWith(hosts["sandbox"], p)
	start := time.Now()
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 100", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Details.Status != api.StatusRunning || time.Since(start) > 8*time.Second { // below the 10 s yield window
		t.Fatalf("background: %v after %s", r.Details, time.Since(start))
	}
}

func TestExecTimeout(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	startWith(hosts["sandbox"], p)
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 5 && touch PROOF", Timeout: ptr(0.05)})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Details
	if d.Status != api.StatusFailed || *d.Signal != "SIGKILL" || d.Reason != "timeout after 0.05s" || d.ExitCode != api.NoExitCode() {
		t.Fatalf("details = %v", d)
	}
	if p.kills.Load() == 0 {
		t.Fatal("process was not killed")
	}
}

func TestExecTimeoutKillHangs(t *testing.T) {
	// A host whose Kill never ends the process: the session still finalizes
	// (after killFinalizeAfter) — too slow for a unit test, so only check the
	// result is "failed" when Wait finally returns a plain exit code.
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	p.killFunc = func(p *fakeProc) { go p.exit(0, "") }
	startWith(hosts["sandbox"], p)
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "trap '' TERM; sleep 9", Timeout: ptr(0.02)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Details.Status != api.StatusFailed || *r.Details.Signal != "SIGKILL" {
		t.Fatalf("details = %v", r.Details)
	}
}

func TestExecBackgroundHasNoDefaultTimeout(t *testing.T) {
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.TimeoutSec = 1 })
	p := newFakeProc(false)
	startWith(hosts["sandbox"], p)
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 100", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	s := m.lookup(r.Details.SessionID, scopeKey("", ""))
	s.mu.Lock()
	armed := s.timer != nil
	s.mu.Unlock()
	if armed {
		t.Fatal("background run without explicit timeout has a timer")
	}

	// With backgroundTimeoutSec configured it has one.
	m2, hosts2 := newTestManager(t, func(c *config.File) { c.Exec.BackgroundTimeoutSec = 3600 })
	startWith(hosts2["sandbox"], newFakeProc(false))
	r, _ = m2.Exec(context.Background(), api.ExecParams{Command: "sleep 100", YieldMs: ptr(10.0)})
	s = m2.lookup(r.Details.SessionID, scopeKey("", ""))
	s.mu.Lock()
	armed = s.timer != nil
	s.mu.Unlock()
	if !armed {
		t.Fatal("backgroundTimeoutSec not applied after yield")
	}
}

func TestExecClientGoneDuringYield(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	startWith(hosts["sandbox"], p)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	r, err := m.Exec(ctx, api.ExecParams{Command: "make"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Details.Status != api.StatusRunning || len(r.Details.Warnings) != 1 {
		t.Fatalf("details = %v", r.Details)
	}
	if p.kills.Load() != 0 {
		t.Fatal("client disconnect killed the run")
	}
}

// TestFaultExecWorkdirRefused (issue 31): a requested workdir the host
// cannot use is an error naming it through the tool itself (the API, MCP,
// --json), never a run in the fallback directory with a warning.
func TestFaultExecWorkdirRefused(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	hosts["sandbox"].resolveFunc = func(context.Context, string, string, string) (string, string, error) {
		return "/workspace", "workdir /nope does not exist; using /workspace", nil
	}
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "pwd", Workdir: "/nope"})
	var ie *toolapi.InputError
	if !errors.As(err, &ie) || ie.Field != "workdir" || ie.Msg != "workdir /nope does not exist" {
		t.Fatalf("Exec with an unusable workdir: %v, %v; want the workdir error", r, err)
	}
	hosts["sandbox"].mu.Lock()
	n := len(hosts["sandbox"].specs)
	hosts["sandbox"].mu.Unlock()
	if n != 0 {
		t.Fatalf("%d commands started", n)
	}
}

func TestExecWorkdirError(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	boom := errors.New("docker unreachable")
	hosts["sandbox"].resolveFunc = func(context.Context, string, string, string) (string, string, error) { return "", "", boom }
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "true"}); !errors.Is(err, boom) {
		t.Fatalf("want wrapped host error, got %v", err)
	}
}

func TestExecStartError(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	boom := errors.New("no such image")
	hosts["sandbox"].startFunc = func(context.Context, StartSpec) (Process, error) { return nil, boom }
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "true"}); !errors.Is(err, boom) {
		t.Fatalf("want wrapped start error, got %v", err)
	}
}

type warnProc struct{ *fakeProc }

func (warnProc) Warnings() []string { return []string{"PTY unavailable; using pipes"} }

func TestExecProcessWarnings(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	p.exit(0, "")
	hosts["sandbox"].startFunc = func(context.Context, StartSpec) (Process, error) { return warnProc{p}, nil }
	r, _ := m.Exec(context.Background(), api.ExecParams{Command: "true", PTY: true})
	if !strings.Contains(text(r), "Warning: PTY unavailable") {
		t.Fatalf("text = %q", text(r))
	}
}

// guardFunc adapts a func to Guard.
type guardFunc func(ctx context.Context, req GuardRequest) (GuardVerdict, error)

func (f guardFunc) Check(ctx context.Context, req GuardRequest) (GuardVerdict, error) {
	return f(ctx, req)
}

func (f guardFunc) Caps() GuardCaps { return GuardCaps{} }

func TestExecSecurityWithoutGuard(t *testing.T) {
	tests := []struct {
		name     string
		host     string
		security string
		ask      string
		p        api.ExecParams
		denied   string // "" = runs
	}{
		{"sandbox deny", "sandbox", "deny", "off", api.ExecParams{}, "security mode is deny"},
		{"sandbox allowlist runs", "sandbox", "allowlist", "on-miss", api.ExecParams{}, ""},
		{"sandbox full runs", "sandbox", "full", "off", api.ExecParams{}, ""},
		{"sandbox ask always", "sandbox", "full", "always", api.ExecParams{}, "no approver is configured"},
		{"sandbox request ask always", "sandbox", "full", "off", api.ExecParams{Ask: "always"}, "no approver is configured"},
		{"request lowers to deny", "sandbox", "full", "off", api.ExecParams{Security: "deny"}, "security mode is deny"},
		{"request cannot raise", "gateway", "allowlist", "off", api.ExecParams{Security: "full"}, "allowlist not available: the command guard is not configured"},
		{"gateway full runs", "gateway", "full", "off", api.ExecParams{}, ""},
		{"gateway allowlist", "gateway", "allowlist", "on-miss", api.ExecParams{}, "allowlist not available: the command guard is not configured"},
		{"gateway deny", "gateway", "deny", "off", api.ExecParams{}, "security mode is deny"},
		{"node allowlist", "node", "allowlist", "off", api.ExecParams{}, "allowlist not available"},
		{"node full ask always", "node", "full", "always", api.ExecParams{}, "no approver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, hosts := newTestManager(t, func(c *config.File) {
				c.Exec.Host, c.Exec.Security, c.Exec.Ask = vocab.Host(tt.host), vocab.Security(tt.security), vocab.Ask(tt.ask)
			})
			tt.p.Command = "ls"
			r, err := m.Exec(context.Background(), tt.p)
			if err != nil {
				t.Fatal(err)
			}
			started := len(hosts[tt.host].specs) > 0
			if tt.denied == "" {
				if r.Details.Status != api.StatusCompleted || !started {
					t.Fatalf("want run, got %v", r.Details)
				}
				return
			}
			reason := r.Details.Reason
			if r.Details.Status != api.StatusDenied || !strings.Contains(reason, tt.denied) || started {
				t.Fatalf("want denied %q (nothing started), got %v started=%v", tt.denied, r.Details, started)
			}
			if !strings.Contains(text(r), tt.denied) {
				t.Fatalf("text %q lacks the reason", text(r))
			}
		})
	}
}

func TestExecGuard(t *testing.T) {
	var got []GuardRequest
	verdict := GuardVerdict{Decision: vocab.DecisionRun}
	g := guardFunc(func(_ context.Context, req GuardRequest) (GuardVerdict, error) {
		got = append(got, req)
		return verdict, nil
	})
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.Host = "gateway" }, func(o *Options) { o.Guard = g })

	// run, with a rewritten command
	verdict = GuardVerdict{Decision: vocab.DecisionRun, Command: "'head' '-n' '1'"}
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "head -n 1", Env: map[string]string{"FOO": "1"}, AgentID: "ag", SessionKey: "sk", Ask: "always"})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("run: %v %v", r.Details, err)
	}
	if hosts["gateway"].lastSpec().Command != "'head' '-n' '1'" {
		t.Fatalf("guard's command not used: %q", hosts["gateway"].lastSpec().Command)
	}
	want := GuardRequest{Command: "head -n 1", Cwd: "/work", Host: "gateway", Env: map[string]string{"FOO": "1"},
		Security: "allowlist", Ask: "always", AgentID: "ag", SessionKey: "sk"}
	if g0 := got[0]; g0.Command != want.Command || g0.Cwd != want.Cwd || g0.Host != want.Host || g0.Security != want.Security ||
		g0.Ask != want.Ask || g0.AgentID != want.AgentID || g0.SessionKey != want.SessionKey || g0.Env["FOO"] != "1" {
		t.Fatalf("guard request = %+v", g0)
	}

	// deny
	verdict = GuardVerdict{Decision: vocab.DecisionDeny, Reason: "allowlist miss: /usr/bin/rm"}
	r, _ = m.Exec(context.Background(), api.ExecParams{Command: "rm -rf /"})
	if r.Details.Status != api.StatusDenied || r.Details.Reason != "allowlist miss: /usr/bin/rm" {
		t.Fatalf("deny: %v", r.Details)
	}

	// approval pending
	verdict = GuardVerdict{Decision: vocab.DecisionApprovalPending, Approval: api.Details{
		ApprovalID: "0b7a6c1e-1111-2222-3333-444455556666", ApprovalSlug: "0b7a6c1e", ExpiresAtMs: 1700000000000,
	}}
	n := len(hosts["gateway"].specs)
	r, _ = m.Exec(context.Background(), api.ExecParams{Command: "curl x"})
	d := r.Details
	if d.Status != api.StatusApprovalPending || d.ApprovalID != "0b7a6c1e-1111-2222-3333-444455556666" || d.Host != "gateway" ||
		d.Command != "curl x" || d.Cwd != "/work" {
		t.Fatalf("pending: %v", d)
	}
	if !strings.Contains(text(r), "sandboxctl approvals resolve 0b7a6c1e-1111-2222-3333-444455556666 allow-once|allow-always|deny") {
		t.Fatalf("pending text = %q", text(r))
	}
	if len(hosts["gateway"].specs) != n {
		t.Fatal("approval-pending started the command")
	}

	// guard error
	verdict = GuardVerdict{Decision: "maybe"}
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "ls"}); err == nil {
		t.Fatal("unknown decision accepted")
	}
}

func TestExecGuardSandboxOnlyForAskAlways(t *testing.T) {
	calls := 0
	g := guardFunc(func(context.Context, GuardRequest) (GuardVerdict, error) {
		calls++
		return GuardVerdict{Decision: vocab.DecisionRun}, nil
	})
	m, _ := newTestManager(t, nil, func(o *Options) { o.Guard = g })
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "ls"}); err != nil || calls != 0 {
		t.Fatalf("guard called for sandbox on-miss: calls=%d err=%v", calls, err)
	}
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "ls", Ask: "always"}); err != nil || calls != 1 {
		t.Fatalf("guard not called for sandbox ask=always: calls=%d err=%v", calls, err)
	}
}

func TestExecElevated(t *testing.T) {
	var seen GuardRequest
	g := guardFunc(func(_ context.Context, req GuardRequest) (GuardVerdict, error) {
		seen = req
		return GuardVerdict{Decision: vocab.DecisionRun}, nil
	})
	tests := []struct {
		name    string
		el      config.Elevated
		p       api.ExecParams
		denied  string
		errFld  string
		sec     string
		ask     string
		noGuard bool
	}{
		{"disabled", config.Elevated{}, api.ExecParams{AgentID: "a"}, "elevated.enabled is false", "", "", "", false},
		{"empty allowFrom is nobody", config.Elevated{Enabled: true}, api.ExecParams{AgentID: "a"}, "not listed in elevated.allowFrom", "", "", "", false},
		{"not listed", config.Elevated{Enabled: true, AllowFrom: []string{"b"}}, api.ExecParams{AgentID: "a"}, "agent a", "", "", "", false},
		{"listed, ask level", config.Elevated{Enabled: true, AllowFrom: []string{"a"}, DefaultLevel: "ask"}, api.ExecParams{AgentID: "a"}, "", "", "allowlist", "on-miss", false},
		{"star, full", config.Elevated{Enabled: true, AllowFrom: []string{"*"}, DefaultLevel: "full"}, api.ExecParams{AgentID: "z", Ask: "always"}, "", "", "full", "off", false},
		{"full without guard runs", config.Elevated{Enabled: true, AllowFrom: []string{"*"}, DefaultLevel: "full"}, api.ExecParams{AgentID: "z"}, "", "", "", "", true},
		{"with other host", config.Elevated{Enabled: true, AllowFrom: []string{"a"}}, api.ExecParams{AgentID: "a", Host: "node"}, "", "host", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen = GuardRequest{}
			m, hosts := newTestManager(t, func(c *config.File) { c.Elevated = tt.el }, func(o *Options) {
				if !tt.noGuard {
					o.Guard = g
				}
			})
			tt.p.Command, tt.p.Elevated = "apt update", true
			r, err := m.Exec(context.Background(), tt.p)
			if tt.errFld != "" {
				var ie *toolapi.InputError
				if !errors.As(err, &ie) || ie.Field != tt.errFld {
					t.Fatalf("want toolapi.InputError %s, got %v", tt.errFld, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.denied != "" {
				if r.Details.Status != api.StatusDenied || !strings.Contains(r.Details.Reason, tt.denied) {
					t.Fatalf("want denied %q, got %v", tt.denied, r.Details)
				}
				return
			}
			if r.Details.Status != api.StatusCompleted || len(hosts["gateway"].specs) != 1 || len(hosts["sandbox"].specs) != 0 {
				t.Fatalf("elevated did not run on gateway: %v", r.Details)
			}
			if !tt.noGuard && (string(seen.Security) != tt.sec || string(seen.Ask) != tt.ask || seen.Host != "gateway") {
				t.Fatalf("guard saw %+v, want security %s ask %s", seen, tt.sec, tt.ask)
			}
		})
	}
}

func TestLimitsFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		cfg  func(*config.File)
		want Limits
	}{
		{"defaults", nil, nil, Limits{YieldMs: 10000, TimeoutSec: 1800, MaxOutputChars: 200000, PendingMaxOutputChars: 30000, JobTTL: 30 * time.Minute, SweepEvery: 5 * time.Minute}},
		{"sandboxctl names", map[string]string{"SANDBOXCTL_YIELD_MS": "500", "SANDBOXCTL_MAX_OUTPUT_CHARS": "5000", "SANDBOXCTL_PENDING_MAX_OUTPUT_CHARS": "2000", "SANDBOXCTL_JOB_TTL_MS": "120000"}, nil,
			Limits{YieldMs: 500, TimeoutSec: 1800, MaxOutputChars: 5000, PendingMaxOutputChars: 2000, JobTTL: 2 * time.Minute, SweepEvery: 30 * time.Second}},
		{"pi aliases", map[string]string{"PI_BASH_YIELD_MS": "700", "PI_BASH_MAX_OUTPUT_CHARS": "3000", "PI_BASH_PENDING_MAX_OUTPUT_CHARS": "1500", "PI_BASH_JOB_TTL_MS": "3600000"}, nil,
			Limits{YieldMs: 700, TimeoutSec: 1800, MaxOutputChars: 3000, PendingMaxOutputChars: 1500, JobTTL: time.Hour, SweepEvery: 10 * time.Minute}},
		{"sandboxctl wins", map[string]string{"SANDBOXCTL_YIELD_MS": "500", "PI_BASH_YIELD_MS": "700"}, nil,
			Limits{YieldMs: 500, TimeoutSec: 1800, MaxOutputChars: 200000, PendingMaxOutputChars: 30000, JobTTL: 30 * time.Minute, SweepEvery: 5 * time.Minute}},
		{"clamped", map[string]string{"SANDBOXCTL_YIELD_MS": "1", "SANDBOXCTL_MAX_OUTPUT_CHARS": "9999999", "SANDBOXCTL_PENDING_MAX_OUTPUT_CHARS": "5", "SANDBOXCTL_JOB_TTL_MS": "99999999999"}, nil,
			Limits{YieldMs: 10, TimeoutSec: 1800, MaxOutputChars: 200000, PendingMaxOutputChars: 1000, JobTTL: 3 * time.Hour, SweepEvery: 30 * time.Minute}},
		{"config", nil, func(c *config.File) {
			c.Exec.BackgroundMs, c.Exec.TimeoutSec, c.Exec.CleanupMs, c.Exec.MaxOutputChars, c.Exec.BackgroundTimeoutSec = 200000, 60, 1000, 10, 7
		}, Limits{YieldMs: 120000, TimeoutSec: 60, BackgroundTimeoutSec: 7, MaxOutputChars: 1000, PendingMaxOutputChars: 30000, JobTTL: time.Minute, SweepEvery: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestManager(t, tt.cfg, func(o *Options) { o.Getenv = func(k string) string { return tt.env[k] } })
			want := tt.want // the session quotas keep their defaults here
			want.RunningPerAgent, want.Running, want.RetainedPerAgent, want.Retained = 32, 256, 64, 512
			if got := m.Limits(); got != want {
				t.Fatalf("limits = %+v\nwant     %+v", got, want)
			}
		})
	}
}

// A bad override is an error naming the variable (config.ApplyEnv's one
// rule), not silently ignored.
func TestBadEnvOverrideRefused(t *testing.T) {
	for _, v := range []string{"soon", "-5", "1.5e4"} {
		_, err := New(Options{Config: config.Default(), Hosts: map[vocab.Host]Host{"sandbox": &fakeHost{}},
			Getenv: func(k string) string {
				if k == "SANDBOXCTL_YIELD_MS" {
					return v
				}
				return ""
			}})
		if err == nil || !strings.Contains(err.Error(), "SANDBOXCTL_YIELD_MS") {
			t.Errorf("SANDBOXCTL_YIELD_MS=%s: %v", v, err)
		}
	}
}

func TestExecAfterClose(t *testing.T) {
	m, err := New(Options{Config: config.Default(), Hosts: map[vocab.Host]Host{"sandbox": &fakeHost{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "true"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("want ErrClosed, got %v", err)
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "list"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("want ErrClosed, got %v", err)
	}
}

func TestExecNodeRefusalIsAResult(t *testing.T) {
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.Host, c.Exec.Security = "node", "full" })
	hosts["node"].startFunc = func(_ context.Context, spec StartSpec) (Process, error) {
		if spec.Node != "build-box" {
			t.Errorf("StartSpec.Node = %q", spec.Node)
		}
		return nil, fmt.Errorf("wrapped: %w", &nodeexec.DeniedError{Node: "build-box", Reason: "SYSTEM_RUN_DENIED: allowlist miss"})
	}
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "rm -rf /", Node: "build-box"})
	if err != nil || r.Details.Status != api.StatusDenied || !strings.Contains(r.Details.Reason, "allowlist miss") {
		t.Fatalf("node denial: %v %v", r.Details, err)
	}
	hosts["node"].startFunc = func(context.Context, StartSpec) (Process, error) { return nil, errors.New("node build-box is offline") }
	if _, err := m.Exec(context.Background(), api.ExecParams{Command: "ls", Node: "build-box"}); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("offline node: %v", err)
	}
}

func TestPublish(t *testing.T) {
	clk := newClock()
	m, _ := newTestManager(t, nil, func(o *Options) { o.Now = clk.Now })
	ch := m.Subscribe(context.Background())
	m.Publish(api.Event{Type: "approval", Text: "Approval requested"})
	ev := <-ch
	if ev.Type != "approval" || !ev.Time.Equal(clk.Now()) {
		t.Fatalf("event %+v", ev)
	}
}
