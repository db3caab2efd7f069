package sandboxctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// LabelRun carries the id of one Run on every container it creates, so
// Terminate removes exactly those.
const LabelRun = "sandboxctl.testcontainers.run"

// The tools' wire types (package api: the standard library and vocab only).
type (
	// ExecParams is the input of the exec tool.
	ExecParams = api.ExecParams
	// ProcessParams is the input of the process tool.
	ProcessParams = api.ProcessParams
	// Result is what both tools return.
	Result = api.Result
)

// A Launcher starts the sandboxctl a test talks to: ContainerMode (the
// daemon in a container) or inprocess.Mode (a sessions.Manager in the
// test process).
type Launcher interface {
	Launch(ctx context.Context, s Settings) (Backend, error)
}

// Backend is a started sandboxctl, as a Launcher returns it.
type Backend interface {
	// Exec and Process are the two tools.
	Exec(ctx context.Context, p ExecParams) (Result, error)
	Process(ctx context.Context, p ProcessParams) (Result, error)
	// Explain returns `sandboxctl sandbox explain --json` of the scope.
	Explain(ctx context.Context, agentID, sessionKey string) (json.RawMessage, error)
	// Files returns where files of host live for the scope, creating
	// the sandbox when it does not exist yet.
	Files(ctx context.Context, host vocab.Host, agentID, sessionKey string) (FileTarget, error)
	// Endpoint is where the daemon listens, for the test's own clients;
	// an error of class cerrdefs.ErrNotImplemented when there is no
	// daemon (the in-process mode).
	Endpoint() (Endpoint, error)
	// Terminate ends every session and removes every container the run
	// created.
	Terminate(ctx context.Context) error
}

// FileTarget is where a host's files live: a container reached through an
// Engine, or, with no Container, this machine's file system.
type FileTarget struct {
	Engine    *client.Client
	Container string
}

// Sandbox is a running sandboxctl and the scope (agent, session key, host)
// its calls use.
type Sandbox struct {
	b        Backend
	settings Settings

	once    sync.Once
	termErr error
}

// Run starts what the test needs and returns the handle, in the idiom of
// testcontainers-go's modules: img is the daemon image of container mode
// (DefaultDaemonImage is the one `make images` builds; it must exist on
// the Engine: Run never pulls it from a registry), and opts mixes this
// module's options with testcontainers-go's, which apply to the daemon
// container. WithLauncher(inprocess.Mode{}) runs in the test process
// instead (img is then unused; see package inprocess). Run creates the
// sandbox of the handle's scope when the host is "sandbox". With WithTB
// the handle is terminated when the test ends; otherwise call Terminate.
func Run(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*Sandbox, error) {
	s := Settings{AgentID: DefaultAgentID, DaemonImage: img}
	for _, o := range opts {
		if opt, ok := o.(Option); ok {
			if err := opt(&s); err != nil {
				return nil, err
			}
			continue
		}
		s.Customizers = append(s.Customizers, o)
	}
	if s.Launcher == nil {
		s.Launcher = ContainerMode{}
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	s.Labels = s.ContainerLabels(hex.EncodeToString(id))
	b, err := s.Launcher.Launch(ctx, s)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{b: b, settings: s}
	if s.TB != nil {
		s.TB.Cleanup(func() {
			tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := sb.Terminate(tctx); err != nil {
				s.TB.Errorf("sandboxctl: terminate: %v", err)
			}
		})
	}
	if s.host() == vocab.HostSandbox {
		if _, err := b.Files(ctx, vocab.HostSandbox, s.AgentID, s.SessionKey); err != nil {
			return nil, errors.Join(fmt.Errorf("sandboxctl: create the sandbox: %w", err), sb.Terminate(context.WithoutCancel(ctx)))
		}
	}
	return sb, nil
}

// ContainerLabels are the labels of every container of a run: the
// testcontainers labels (org.testcontainers=true, its session id, …, so its
// reaper recognises them), LabelRun=runID, then Labels.
func (s Settings) ContainerLabels(runID string) map[string]string {
	labels := testcontainers.GenericLabels()
	labels[LabelRun] = runID
	maps.Copy(labels, s.Labels)
	return labels
}

// RunID is the id of the run (the value of LabelRun on its containers).
func (s Settings) RunID() string { return s.Labels[LabelRun] }

// Settings returns the options the handle was started with.
func (sb *Sandbox) Settings() Settings { return sb.settings }

// Exec calls the exec tool; an empty AgentID, SessionKey or Host is the
// handle's.
func (sb *Sandbox) Exec(ctx context.Context, p ExecParams) (Result, error) {
	if p.AgentID == "" {
		p.AgentID = sb.settings.AgentID
	}
	if p.SessionKey == "" {
		p.SessionKey = sb.settings.SessionKey
	}
	if p.Host == "" {
		p.Host = string(sb.settings.Host)
	}
	return sb.b.Exec(ctx, p)
}

// Process calls the process tool (poll, log, write, kill, … of background
// sessions); an empty AgentID or SessionKey is the handle's.
func (sb *Sandbox) Process(ctx context.Context, p ProcessParams) (Result, error) {
	if p.AgentID == "" {
		p.AgentID = sb.settings.AgentID
	}
	if p.SessionKey == "" {
		p.SessionKey = sb.settings.SessionKey
	}
	return sb.b.Process(ctx, p)
}

// Explanation is the effective sandbox config of the handle's scope and
// whether it would be recreated (`sandboxctl sandbox explain`).
type Explanation struct {
	ScopeKey   string `json:"scopeKey"`
	Name       string `json:"name"`
	ConfigHash string `json:"configHash"`
	Recreate   string `json:"recreate"`
	// Raw is the whole explanation as JSON (config, limits, hardening read
	// back from the Engine, …).
	Raw json.RawMessage `json:"-"`
}

// Explain explains the sandbox of the handle's scope.
func (sb *Sandbox) Explain(ctx context.Context) (Explanation, error) {
	raw, err := sb.b.Explain(ctx, sb.settings.AgentID, sb.settings.SessionKey)
	if err != nil {
		return Explanation{}, err
	}
	var ex Explanation
	if err := json.Unmarshal(raw, &ex); err != nil {
		return Explanation{}, fmt.Errorf("sandboxctl: decode explanation: %w", err)
	}
	ex.Raw = raw
	return ex, nil
}

// CopyToContainer writes content to path (absolute) where the handle's
// commands run, with mode; it is owned by the sandbox's user. In a sandbox
// the path must be on a writable mount (under /workspace: the root file
// system is read-only and the Engine cannot copy onto tmpfs mounts).
func (sb *Sandbox) CopyToContainer(ctx context.Context, content []byte, path string, mode int64) error {
	ft, err := sb.b.Files(ctx, sb.settings.host(), sb.settings.AgentID, sb.settings.SessionKey)
	if err != nil {
		return err
	}
	return ft.copyTo(ctx, content, path, mode)
}

// CopyFileFromContainer reads the file at path (absolute) where the
// handle's commands run. Close the reader.
func (sb *Sandbox) CopyFileFromContainer(ctx context.Context, path string) (io.ReadCloser, error) {
	ft, err := sb.b.Files(ctx, sb.settings.host(), sb.settings.AgentID, sb.settings.SessionKey)
	if err != nil {
		return nil, err
	}
	return ft.copyFrom(ctx, path)
}

// Endpoint says where the daemon of container mode listens and how to
// authenticate, so a test can point its own client at it: sandboxctl's
// HTTP API, an MCP client (Endpoint.MCPURL), any HTTP client
// (Endpoint.HTTPClient). The in-process mode has no daemon: its error is
// of class cerrdefs.ErrNotImplemented.
func (sb *Sandbox) Endpoint() (Endpoint, error) { return sb.b.Endpoint() }

// Terminate ends every session, removes every container of the run and
// stops what Run started. It is safe to call more than once.
func (sb *Sandbox) Terminate(ctx context.Context) error {
	sb.once.Do(func() { sb.termErr = sb.b.Terminate(ctx) })
	return sb.termErr
}
