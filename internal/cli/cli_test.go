package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

func TestExecExitCode(t *testing.T) {
	tests := []struct {
		name    string
		details map[string]any
		want    int
	}{
		{"completed 0", map[string]any{"status": "completed", "exitCode": 0.0}, 0},
		{"completed 3", map[string]any{"status": "completed", "exitCode": 3.0}, 3},
		{"running", map[string]any{"status": "running", "sessionId": "x"}, 0},
		{"approval pending", map[string]any{"status": "approval-pending"}, 0},
		{"denied", map[string]any{"status": "denied", "reason": "no"}, 1},
		{"timeout", map[string]any{"status": "failed", "signal": "SIGKILL", "reason": "timeout after 1s"}, 124},
		{"killed", map[string]any{"status": "failed", "signal": "SIGKILL", "reason": "terminated by signal SIGKILL"}, 137},
		{"terminated", map[string]any{"status": "failed", "signal": "SIGTERM"}, 143},
		{"short signal name", map[string]any{"status": "failed", "signal": "hup"}, 129},
		{"failed otherwise", map[string]any{"status": "failed", "reason": "aborted"}, 1},
		{"no status", map[string]any{}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// As the CLI gets them: decoded from the daemon's JSON.
			raw, err := json.Marshal(map[string]any{"details": tc.details})
			if err != nil {
				t.Fatal(err)
			}
			var res api.Result
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			if got := ExecExitCode(res); got != tc.want {
				t.Errorf("ExecExitCode = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestExitFrameError: the exit code of a waiting exec, from its exit
// frame (api.StreamFrame.Exit), and the reason of a failure on stderr.
func TestExitFrameError(t *testing.T) {
	for _, tc := range []struct {
		name       string
		frame      string
		want       int // 0: no error
		wantStderr string
	}{
		{"exited 0", `{"type":"exit","status":"completed","exitCode":0}`, 0, ""},
		{"exited 3", `{"type":"exit","status":"completed","exitCode":3}`, 3, ""},
		{"timeout", `{"type":"exit","status":"failed","signal":"SIGKILL","reason":"` + api.TimeoutReason("1s") + `"}`, ExitTimeout, "sandboxctl: timeout after 1s\n"},
		{"killed", `{"type":"exit","status":"failed","signal":"SIGKILL","reason":"` + api.KillReasonKilled + `"}`, 137, "sandboxctl: killed\n"},
		{"signaled", `{"type":"exit","status":"failed","signal":"SIGTERM","reason":"` + api.SignalReason("SIGTERM") + `"}`, 143, "sandboxctl: terminated by signal SIGTERM\n"},
		{"lost", `{"type":"exit","status":"failed","reason":"the sandbox was removed"}`, ExitOwnFailure, "sandboxctl: the sandbox was removed\n"},
		{"no exit code", `{"type":"exit","status":"completed"}`, ExitOwnFailure, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f api.StreamFrame
			if err := json.Unmarshal([]byte(tc.frame), &f); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			err := exitFrameError(&stderr, f)
			got := 0
			if ee := (*ExitError)(nil); errors.As(err, &ee) {
				got = ee.Code
			} else if err != nil {
				t.Fatalf("error %v is no ExitError", err)
			}
			if got != tc.want || stderr.String() != tc.wantStderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", got, stderr.String(), tc.want, tc.wantStderr)
			}
		})
	}
}

func TestExecParams(t *testing.T) {
	tests := []struct {
		name    string
		opts    ExecOptions
		wantCmd string
		wantEnv map[string]string
		wantErr string
	}{
		{name: "joined", opts: ExecOptions{Command: []string{"ls", "-la", "/tmp"}}, wantCmd: "ls -la /tmp"},
		{name: "env", opts: ExecOptions{Command: []string{"env"}, Env: []string{"A=1", "B=x=y", "C="}}, wantCmd: "env",
			wantEnv: map[string]string{"A": "1", "B": "x=y", "C": ""}},
		{name: "env without =", opts: ExecOptions{Command: []string{"true"}, Env: []string{"FOO"}}, wantErr: "KEY=VALUE"},
		{name: "env empty key", opts: ExecOptions{Command: []string{"true"}, Env: []string{"=v"}}, wantErr: "key is empty"},
		{name: "env twice", opts: ExecOptions{Command: []string{"true"}, Env: []string{"A=1", "A=2"}}, wantErr: "given twice"},
		{name: "no command", opts: ExecOptions{}, wantErr: "missing COMMAND"},
		{name: "blank command", opts: ExecOptions{Command: []string{" ", ""}}, wantErr: "Provide a command to start."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.opts.Params()
			if tc.wantErr != "" {
				var exitErr *ExitError
				if !errors.As(err, &exitErr) || exitErr.Code != 2 || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Command != tc.wantCmd {
				t.Errorf("command %q, want %q", p.Command, tc.wantCmd)
			}
			if len(p.Env) != len(tc.wantEnv) {
				t.Errorf("env %v, want %v", p.Env, tc.wantEnv)
			}
			for k, v := range tc.wantEnv {
				if p.Env[k] != v {
					t.Errorf("env[%s] = %q, want %q", k, p.Env[k], v)
				}
			}
		})
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantOut  string
	}{
		{"nil", nil, 0, ""},
		{"silent exit", &ExitError{Code: 3}, 3, ""},
		{"usage", UsageErrorf("bad flag"), 2, "sandboxctl: bad flag\n"},
		{"api 400", &apiclient.APIError{StatusCode: 400, Message: "Provide a command to start."}, 2, "sandboxctl: Provide a command to start.\n"},
		{"api 503", &apiclient.APIError{StatusCode: 503, Message: "docker down"}, 1, "sandboxctl: docker down\n"},
		{"invalid argument class", cerrdefs.ErrInvalidArgument, 2, "sandboxctl: invalid argument\n"},
		{"other", errors.New("boom"), 1, "sandboxctl: boom\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if code := Report(tc.err, &buf); code != tc.wantCode || buf.String() != tc.wantOut {
				t.Errorf("Report = %d %q, want %d %q", code, buf.String(), tc.wantCode, tc.wantOut)
			}
		})
	}
}

func TestStateDirPrecedence(t *testing.T) {
	env := map[string]string{}
	c := &CLI{Getenv: func(k string) string { return env[k] }}
	cfg, err := c.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.State = "/from/config"
	check := func(want string) {
		t.Helper()
		got, err := c.StateDir(cfg)
		if err != nil || got != want {
			t.Errorf("StateDir = %q, %v; want %q", got, err, want)
		}
	}
	check("/from/config")
	env[string(envknob.State)] = "/from/env"
	check("/from/env")
	c.StateFlag = "/from/flag"
	check("/from/flag")
}

func TestCommandTree(t *testing.T) {
	// The light sandboxctl: the client commands with their actions, and a
	// stand-in for each runtime command that hands over to sandboxctld.
	c := &CLI{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	root := NewRootCommand(c, ForwardingCommands(c)...)
	for _, path := range [][]string{
		{"exec"}, {"version"}, {"approvals", "list"}, {"approvals", "resolve"},
		{"process", "list"}, {"process", "poll"}, {"process", "log"}, {"process", "write"},
		{"process", "send-keys"}, {"process", "paste"}, {"process", "submit"}, {"process", "kill"},
		{"process", "clear"}, {"process", "remove"}, {"process", "resize"},
	} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] || cmd.RunE == nil {
			t.Errorf("sandboxctl %s: missing (%v)", strings.Join(path, " "), err)
		}
	}
	for _, rc := range RuntimeCommands() {
		cmd, _, err := root.Find([]string{rc.Name})
		if err != nil || cmd.Name() != rc.Name || !cmd.DisableFlagParsing || cmd.Short != rc.Short || cmd.RunE == nil {
			t.Errorf("sandboxctl %s: no forwarding stand-in (%v)", rc.Name, err)
		}
	}
}

func TestForwardWithoutDaemonBinary(t *testing.T) {
	c := &CLI{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{},
		Getenv: func(k string) string {
			if k == string(envknob.DaemonBinary) {
				return "/nonexistent/sandboxctld"
			}
			return ""
		}}
	root := NewRootCommand(c, ForwardingCommands(c)...)
	root.SetArgs([]string{"sandbox", "ls"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/sandboxctld") {
		t.Fatalf("forwarding to a missing sandboxctld: %v", err)
	}
}
