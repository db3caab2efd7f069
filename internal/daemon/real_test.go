package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/hosttest"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// startGatewayDaemon serves a real sessions.Manager whose only host is this
// machine (the gateway), with security full and ask off so that no guard is
// needed. It returns the manager too, for its events.
func startGatewayDaemon(t testing.TB, tune ...func(*Options)) (*running, *sessions.Manager) {
	t.Helper()
	// A hermetic runner: no login profile of the machine's user (whose
	// probe may take its full timeout) decides what the commands see.
	runner, err := hostexec.NewRunner(t.Context(), hostexec.Options{
		Shell:   "/bin/sh",
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"},
		Logf:    t.Logf,
	})
	if err != nil {
		t.Skipf("gateway host not available on this system: %v", err)
	}
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	mgr, err := sessions.New(sessions.Options{
		Config: cfg,
		Hosts:  map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(runner, t.TempDir())},
		Logf:   t.Logf,
	})
	if err != nil {
		t.Fatalf("sessions.New: %v", err)
	}
	opts := Options{
		Tools:          mgr,
		Streams:        mgr,
		IsInvalidInput: toolapi.IsInvalidInput,
		Events:         mgr,
	}
	for _, f := range tune {
		f(&opts)
	}
	r := startServer(t, opts)
	return r, mgr
}

func TestRealExecRoundTrip(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	res, err := r.client.Exec(t.Context(), api.ExecParams{Command: "echo hi; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Details.Status != api.StatusCompleted || res.Details.ExitCode != api.Code(3) {
		t.Errorf("details = %v", res.Details)
	}
	if len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].Text, "hi") {
		t.Errorf("content = %+v", res.Content)
	}
	// Bad input is the caller's fault: 400 with the tool's message.
	_, err = r.client.Exec(t.Context(), api.ExecParams{Command: "  "})
	var apiErr *apiclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "Provide a command to start.") {
		t.Errorf("empty command: %v", err)
	}
	// An unknown session is an ordinary answer, at once.
	pres, err := r.client.Process(t.Context(), api.ProcessParams{Action: "poll", SessionID: "nope"})
	if err != nil || !errors.Is(pres.Err(), api.ErrNoSession) {
		t.Errorf("poll nope: %+v, %v", pres, err)
	}
}

func TestRealEventsExitOfBackgroundSession(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := r.client.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	res, err := r.client.Exec(ctx, api.ExecParams{Command: "sleep 0.2; echo bye", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	if res.Details.Status != api.StatusRunning || id == "" {
		t.Fatalf("background exec: %v", res.Details)
	}
	for {
		var ev api.Event
		if err := stream.Next(&ev); err != nil {
			t.Fatalf("no exit event for %s: %v", id, err)
		}
		if ev.Type == "exit" && ev.SessionID == id {
			if !strings.Contains(ev.Text, "bye") || !strings.Contains(ev.Text, id) {
				t.Errorf("exit event text %q", ev.Text)
			}
			return
		}
	}
}

func TestRealShutdownKillsBackgroundProcesses(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	res, err := r.client.Exec(t.Context(), api.ExecParams{Command: "sleep 300", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	if res.Details.PID != nil {
		pid = *res.Details.PID
	}
	if pid <= 0 {
		t.Fatalf("no pid in %v", res.Details)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("background sleep (pid %d) not running: %v", pid, err)
	}
	r.stop(t)
	// Neither the process nor anything in its group may be left.
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil || syscall.Kill(-pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d (or its group) still alive after graceful shutdown", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRealShutdownEndsForegroundExec(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	done := make(chan error, 1)
	go func() {
		yield := 60000.0
		_, err := r.client.Exec(context.Background(), api.ExecParams{Command: "sleep 300", YieldMs: &yield})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // let it start
	start := time.Now()
	r.stop(t)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("foreground exec still waiting after shutdown")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("shutdown took %s", d)
	}
}

// TestGatewayConformanceThroughAPI runs the host conformance suite through
// the daemon's HTTP API (internal/apiclient over its unix socket): the same
// tool calls and assertions as against the Manager itself, so the wire
// keeps every field and text the tools return.
func TestGatewayConformanceThroughAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance suite runs real processes for ~10 s")
	}
	hosttest.Run(t, func(t *testing.T) hosttest.Target {
		r, mgr := startGatewayDaemon(t)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := mgr.Close(ctx); err != nil {
				t.Errorf("Manager.Close: %v", err)
			}
		})
		scratch := t.TempDir()
		return hosttest.Target{
			Tools:      r.client,
			Host:       "gateway",
			AgentID:    "agent-api",
			SessionKey: "session-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Scratch:    scratch,
			Inspect: func(ctx context.Context, command string) (string, error) {
				out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput()
				return string(out), err
			},
		}
	})
}

// TestFaultExecBadNumbersRefused replays issue 32 item 10: a huge or
// overflowing timeout and a huge or fractional yieldMs were accepted (200)
// and the command ran. Each is refused with 400 naming the field, and the
// command (which would create a marker file) never runs.
func TestFaultExecBadNumbersRefused(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	marker := filepath.Join(t.TempDir(), "RAN")
	for _, tc := range []struct{ field, value string }{
		{"timeout", "1e12"},
		{"timeout", "1e300"},
		{"timeout", "9223372037"}, // seconds: overflows time.Duration
		{"yieldMs", "1e15"},
		{"yieldMs", "2.5"},
		{"yieldMs", "120001"},
	} {
		body := fmt.Sprintf(`{"command":"touch %s","%s":%s}`, marker, tc.field, tc.value)
		code, msg := postRaw(t, r.srv, "/v1/tools/exec", []byte(body))
		if code != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s=%s: got %d %q, want 400 naming %s", tc.field, tc.value, code, msg, tc.field)
		}
	}
	if code, msg := postRaw(t, r.srv, "/v1/tools/exec", []byte(`{"command":"true","timeout":604800,"yieldMs":120000}`)); code != 200 {
		t.Errorf("the largest accepted values refused: %d %q", code, msg)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused command ran (marker: %v)", err)
	}
}
