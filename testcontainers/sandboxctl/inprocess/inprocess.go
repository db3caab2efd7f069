// Package inprocess is the fast mode of package sandboxctl: the sandboxctl
// packages run inside the test process (a sessions.Manager over the sandbox
// and gateway hosts, talking to the local Docker Engine), with no daemon.
// It links the sandboxctl runtime into the test binary; container mode
// (sandboxctl.ContainerMode) does not.
//
//	sb, err := sandboxctl.Run(ctx, sandboxctl.WithLauncher(inprocess.Mode{}), sandboxctl.WithTB(t))
//
// There is no command guard in this mode (no approvals store, no
// approver): the sessions.Manager fails closed, so gateway commands run
// only with exec.security "full", and ask "always" is refused. Sandbox
// commands run as configured. The SANDBOXCTL_* environment overrides are
// not read: a test's configuration is what its options say.
//
// The supervisor: WithSupervisorBinary, else $SANDBOXCTL_SUPERVISOR, else
// each Run builds it with the go command (about 2 s with a warm build
// cache); build it once in TestMain and name it to save that.
package inprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/testcontainers/testcontainers-go"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// SupervisorPackage is built when no supervisor binary is given.
const SupervisorPackage = "github.com/sandboxctl/sandboxctl/cmd/sandboxctl-supervisor"

// Mode is the in-process Launcher.
type Mode struct{}

// Run is sandboxctl.Run in this mode. There is no daemon image and no
// daemon container, so it takes only the module's own options.
func Run(ctx context.Context, opts ...sandboxctl.Option) (*sandboxctl.Sandbox, error) {
	all := []testcontainers.ContainerCustomizer{sandboxctl.WithLauncher(Mode{})}
	for _, o := range opts {
		all = append(all, o)
	}
	return sandboxctl.Run(ctx, "", all...)
}

// Endpoint implements sandboxctl.Backend: this mode has no daemon.
func (*backend) Endpoint() (sandboxctl.Endpoint, error) {
	return sandboxctl.Endpoint{}, fmt.Errorf("%w: the in-process mode has no daemon to point a client at; use container mode (sandboxctl.Run)", cerrdefs.ErrNotImplemented)
}

// Launch implements sandboxctl.Launcher.
func (Mode) Launch(ctx context.Context, s sandboxctl.Settings) (sandboxctl.Backend, error) {
	if len(s.Customizers) > 0 {
		return nil, fmt.Errorf("%w: %d testcontainers option(s) given, but the in-process mode starts no container for them to customise", sandboxctl.ErrInvalidOption, len(s.Customizers))
	}
	dir, err := os.MkdirTemp("", "sandboxctl-tc-")
	if err != nil {
		return nil, fmt.Errorf("sandboxctl: %w", err)
	}
	b := &backend{dir: dir, runID: s.RunID()}
	if s.TB != nil {
		b.logf = s.TB.Logf
	} else {
		b.logf = func(string, ...any) {}
	}
	if err := b.start(ctx, s); err != nil {
		return nil, errors.Join(err, b.Terminate(context.WithoutCancel(ctx)))
	}
	return b, nil
}

type backend struct {
	dir   string
	runID string
	logf  func(string, ...any)

	sbx *sandbox.Manager
	mgr *sessions.Manager
}

func (b *backend) start(ctx context.Context, s sandboxctl.Settings) error {
	state := filepath.Join(b.dir, "state")
	doc, err := s.ConfigYAML(map[string]any{
		"state":                          state,
		"sandbox.workspaceRoot":          filepath.Join(b.dir, "workspaces"),
		"sandbox.docker.containerPrefix": "sbxtc-" + b.runID + "-",
	})
	if err != nil {
		return err
	}
	cfg, err := config.Parse("sandboxctl.yaml (testcontainers options)", doc)
	if err != nil {
		return fmt.Errorf("%w: %w", sandboxctl.ErrInvalidOption, err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("sandboxctl: %w", err)
	}
	supBin, disable, err := b.supervisor(ctx, s)
	if err != nil {
		return err
	}
	b.sbx, err = sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: state, Home: b.dir,
		Labels: s.Labels, DisableSupervisor: disable, SupervisorBinary: supBin, Logf: b.logf})
	if err != nil {
		return fmt.Errorf("sandboxctl: %w", err)
	}
	runner, err := hostexec.NewRunner(ctx, hostexec.Options{PathPrepend: cfg.Exec.PathPrepend, Logf: b.logf})
	if err != nil {
		return fmt.Errorf("sandboxctl: gateway host: %w", err)
	}
	cwd, err := config.ExpandHome(cfg.Exec.Cwd)
	if err != nil {
		return fmt.Errorf("sandboxctl: exec.cwd: %w", err)
	}
	b.mgr, err = sessions.New(sessions.Options{Config: cfg, Logf: b.logf,
		Getenv: func(string) string { return "" },
		Hosts: map[vocab.Host]sessions.Host{
			vocab.HostSandbox: sessions.NewSandboxHost(b.sbx),
			vocab.HostGateway: sessions.NewGatewayHost(runner, cwd),
		}})
	if err != nil {
		return fmt.Errorf("sandboxctl: %w", err)
	}
	return nil
}

// supervisor returns the supervisor binary to deliver into sandboxes, or
// disable. With no binary given (option, $SANDBOXCTL_SUPERVISOR) it builds
// one with the go command; when that fails the default falls back to the
// plain exec path with a log line, WithSupervisor(true) fails.
func (b *backend) supervisor(ctx context.Context, s sandboxctl.Settings) (bin string, disable bool, err error) {
	if s.Supervisor != nil && !*s.Supervisor {
		return "", true, nil
	}
	if s.SupervisorBinary != "" {
		return s.SupervisorBinary, false, nil
	}
	if env := os.Getenv(string(envknob.Supervisor)); env != "" {
		return env, false, nil
	}
	out := filepath.Join(b.dir, sandbox.SupervisorBinaryName)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, SupervisorPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, berr := cmd.CombinedOutput(); berr != nil {
		berr = fmt.Errorf("sandboxctl: build the supervisor (go build %s): %w\n%s", SupervisorPackage, berr, msg)
		if s.Supervisor != nil {
			return "", false, berr
		}
		b.logf("%v; sandboxes use the plain exec path", berr)
		return "", true, nil
	}
	return out, false, nil
}

func (b *backend) Exec(ctx context.Context, p sandboxctl.ExecParams) (sandboxctl.Result, error) {
	return b.mgr.Exec(ctx, p)
}

func (b *backend) Process(ctx context.Context, p sandboxctl.ProcessParams) (sandboxctl.Result, error) {
	return b.mgr.Process(ctx, p)
}

func (b *backend) Explain(ctx context.Context, agentID, sessionKey string) (json.RawMessage, error) {
	ex, err := b.sbx.Explain(ctx, sandbox.Scope{AgentID: agentID, SessionKey: sessionKey})
	if err != nil {
		return nil, err
	}
	return json.Marshal(ex)
}

func (b *backend) Files(ctx context.Context, host vocab.Host, agentID, sessionKey string) (sandboxctl.FileTarget, error) {
	if host == vocab.HostGateway {
		return sandboxctl.FileTarget{}, nil
	}
	res, err := b.sbx.Ensure(ctx, sandbox.Scope{AgentID: agentID, SessionKey: sessionKey})
	if err != nil {
		return sandboxctl.FileTarget{}, err
	}
	return sandboxctl.FileTarget{Engine: b.sbx.Client(), Container: res.ID}, nil
}

// Terminate ends the sessions, removes every container labelled with the
// run's id and deletes the state and workspaces.
func (b *backend) Terminate(ctx context.Context) error {
	var errs []error
	if b.mgr != nil {
		if err := b.mgr.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("sandboxctl: close sessions: %w", err))
		}
	}
	if b.sbx != nil {
		errs = append(errs, sandboxctl.RemoveRun(ctx, b.sbx.Client(), b.runID))
		if err := b.sbx.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(b.dir); err != nil {
		b.logf("sandboxctl: remove %s: %v", b.dir, err)
	}
	return errors.Join(errs...)
}
