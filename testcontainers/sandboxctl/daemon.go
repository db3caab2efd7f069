package sandboxctl

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Paths and names inside the daemon image (images/build.sh daemon).
const (
	daemonBinary     = "/usr/local/bin/sandboxctl"
	daemonSupervisor = "/usr/local/lib/sandboxctl/sandboxctl-supervisor"
	daemonConfig     = "/etc/sandboxctl/sandboxctl.yaml"
	daemonCert       = "/etc/sandboxctl/tls.crt"
	daemonKey        = "/etc/sandboxctl/tls.key"
	daemonState      = "/var/lib/sandboxctl"
	engineSocket     = "/var/run/docker.sock"
	// SandboxLabelsEnv gives the daemon the labels to put on its
	// sandboxes (KEY=VALUE,…; see `sandboxctl serve`).
	SandboxLabelsEnv = string(envknob.SandboxLabels)
)

// ContainerMode is the default Launcher: the sandboxctl daemon itself in a
// container of DaemonImage, reached over its TCP listener (TLS with a
// certificate made for this run, a bearer token made for this run). The
// daemon container runs in this machine's network namespace and listens on
// its loopback only. The test links only this package,
// testcontainers-go and the tools' wire types.
//
// The daemon creates sandboxes through the host's Docker Engine: its socket
// is mounted into the daemon container. Whoever controls that socket is
// root on the host; the daemon container is therefore as trusted as the
// test itself, and the gateway host (commands run in the daemon container)
// has that power too. Sandboxes do not get the socket.
//
// Workspaces live in a directory of this machine that is mounted into the
// daemon container at the same path, so that the bind mounts the daemon
// asks the Engine for name the same directory.
type ContainerMode struct{}

// Launch implements Launcher.
func (ContainerMode) Launch(ctx context.Context, s Settings) (Backend, error) {
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandboxctl: docker client: %w", err)
	}
	b := &daemonBackend{dc: dc, runID: s.RunID()}
	if err := b.start(ctx, s); err != nil {
		return nil, errors.Join(err, b.Terminate(context.WithoutCancel(ctx)))
	}
	return b, nil
}

type daemonBackend struct {
	dc       *testcontainers.DockerClient
	runID    string
	ws       string // workspaces, same path here and in the daemon container
	ctr      *testcontainers.DockerContainer
	api      *apiClient
	endpoint Endpoint
}

func (b *daemonBackend) start(ctx context.Context, s Settings) error {
	socket, ok := strings.CutPrefix(b.dc.DaemonHost(), "unix://")
	if !ok {
		return fmt.Errorf("sandboxctl: container mode needs an Engine on a local unix socket to mount into the daemon container (DOCKER_HOST is %s); use the in-process mode", b.dc.DaemonHost())
	}
	ws, err := os.MkdirTemp("", "sandboxctl-tc-ws-")
	if err != nil {
		return fmt.Errorf("sandboxctl: %w", err)
	}
	b.ws = ws
	doc, err := s.ConfigYAML(map[string]any{
		"state": daemonState,
		// Named: the default, <state>/workspaces, lies inside the daemon
		// container, where the Engine (which binds the sources on its
		// host) cannot find it.
		"sandbox.workspaceRoot":          ws,
		"sandbox.docker.containerPrefix": "sbxtc-" + b.runID + "-",
		// Sandbox identities bind account files from the daemon's state
		// directory, which is no path on the Engine's host here: the
		// sandboxes run as a fixed user instead (SECURITY.md says so).
		"sandbox.docker.user": "1000:1000",
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(s.DaemonImage) == "" {
		return fmt.Errorf("%w: daemon image: empty reference (the one `make images` builds is %s)", ErrInvalidOption, DefaultDaemonImage)
	}
	// The image must be here: never a pull from a registry (that would
	// run an image this tree did not build, or wait on a registry).
	if _, err := b.dc.ImageInspect(ctx, s.DaemonImage); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("sandboxctl: the daemon image %s is not on this Engine: build it with images/build.sh daemon (make images); it is never pulled from a registry: %w", s.DaemonImage, err)
		}
		return fmt.Errorf("sandboxctl: inspect the daemon image %s: %w", s.DaemonImage, err)
	}
	cert, key, err := selfSigned()
	if err != nil {
		return err
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("sandboxctl: token: %w", err)
	}
	token := hex.EncodeToString(tok)
	labels := make([]string, 0, len(s.Labels))
	for k, v := range s.Labels {
		labels = append(labels, k+"="+v)
	}
	slices.Sort(labels)
	env := map[string]string{string(envknob.Token): token, SandboxLabelsEnv: strings.Join(labels, ",")}
	env[string(envknob.Supervisor)] = daemonSupervisor
	if s.Supervisor != nil && !*s.Supervisor {
		env[string(envknob.Supervisor)] = envknob.SupervisorOff // the plain exec path, on purpose
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	listen := net.JoinHostPort("127.0.0.1", port)
	customizers := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(daemonBinary, "--config", daemonConfig, "serve",
			"--listen", listen, "--tls-cert", daemonCert, "--tls-key", daemonKey),
		testcontainers.WithEnv(env),
		testcontainers.WithLabels(s.Labels),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytes.NewReader(doc), ContainerFilePath: daemonConfig, FileMode: 0o600},
			testcontainers.ContainerFile{Reader: bytes.NewReader(cert), ContainerFilePath: daemonCert, FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytes.NewReader(key), ContainerFilePath: daemonKey, FileMode: 0o600}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.Mounts = append(hc.Mounts,
				mount.Mount{Type: mount.TypeBind, Source: socket, Target: engineSocket},
				mount.Mount{Type: mount.TypeBind, Source: ws, Target: ws})
			hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
			// This machine's network, so that the listener is on its
			// loopback: nothing else reaches it, and no port publishing
			// (nor a working docker bridge) is needed.
			hc.NetworkMode = "host"
		}),
		// On an Engine without the default bridge, testcontainers attaches
		// every container to a network of its own ("reaper_default"); a
		// host-network container can join none.
		testcontainers.WithEndpointSettingsModifier(func(eps map[string]*network.EndpointSettings) { clear(eps) }),
		testcontainers.WithWaitStrategy(wait.ForLog("also listening on tcp").WithStartupTimeout(time.Minute)),
		// A pull would only fail (the image was inspected above) or
		// fetch another image of the same name.
		testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			req.AlwaysPullImage = false
			return nil
		}),
	}
	// The caller's testcontainers options come last: they may change
	// what ours set (env, mounts, …) for the daemon container.
	b.ctr, err = testcontainers.Run(ctx, s.DaemonImage, append(customizers, s.Customizers...)...)
	if err != nil {
		return fmt.Errorf("sandboxctl: start the daemon container (%s; build it with images/build.sh daemon): %w", s.DaemonImage, err)
	}
	b.endpoint = Endpoint{URL: "https://" + listen, Token: token, CertPEM: cert}
	b.api = newAPIClient(b.endpoint)
	var health struct {
		OK bool `json:"ok"`
	}
	if err := b.api.do(ctx, http.MethodGet, "/healthz", nil, &health); err != nil || !health.OK {
		return fmt.Errorf("sandboxctl: the daemon container does not answer on %s: %w (ok=%v)", listen, err, health.OK)
	}
	return nil
}

// freePort returns a TCP port free on this machine's loopback right now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("sandboxctl: find a free port: %w", err)
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

func (b *daemonBackend) Exec(ctx context.Context, p ExecParams) (Result, error) {
	var r Result
	return r, b.api.call(ctx, "/v1/tools/exec", p, &r)
}

func (b *daemonBackend) Process(ctx context.Context, p ProcessParams) (Result, error) {
	var r Result
	return r, b.api.call(ctx, "/v1/tools/process", p, &r)
}

// Explain runs `sandboxctl sandbox explain --json` in the daemon container
// (same config and state directory as the daemon).
func (b *daemonBackend) Explain(ctx context.Context, agentID, sessionKey string) (json.RawMessage, error) {
	argv := []string{daemonBinary, "--config", daemonConfig, "--json", "sandbox", "explain", "--agent", agentID}
	if sessionKey != "" {
		argv = append(argv, "--session", sessionKey)
	}
	code, r, err := b.ctr.Exec(ctx, argv, tcexec.Multiplexed())
	if err != nil {
		return nil, fmt.Errorf("sandboxctl: explain: %w", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("sandboxctl: explain: %w", err)
	}
	if code != 0 || !json.Valid(out) {
		return nil, fmt.Errorf("sandboxctl: explain exited %d: %s", code, bytes.TrimSpace(out))
	}
	return out, nil
}

func (b *daemonBackend) Files(ctx context.Context, host vocab.Host, agentID, sessionKey string) (FileTarget, error) {
	if host == vocab.HostGateway {
		return FileTarget{Engine: b.dc.Client, Container: b.ctr.GetContainerID()}, nil
	}
	for range 2 {
		raw, err := b.Explain(ctx, agentID, sessionKey)
		if err != nil {
			return FileTarget{}, err
		}
		var ex struct {
			Name      string `json:"name"`
			Container *struct {
				ID string `json:"id"`
			} `json:"container"`
		}
		if err := json.Unmarshal(raw, &ex); err != nil {
			return FileTarget{}, fmt.Errorf("sandboxctl: decode explanation: %w", err)
		}
		if ex.Container != nil && ex.Container.ID != "" {
			return FileTarget{Engine: b.dc.Client, Container: ex.Container.ID}, nil
		}
		// No sandbox yet: the daemon creates it for a first command.
		res, err := b.Exec(ctx, ExecParams{Command: "true", Host: string(vocab.HostSandbox), AgentID: agentID, SessionKey: sessionKey})
		if err != nil {
			return FileTarget{}, err
		}
		if st := res.Details.Status; st != "completed" {
			return FileTarget{}, fmt.Errorf("sandboxctl: create the sandbox of %s: %s", agentID, resultText(res))
		}
	}
	return FileTarget{}, fmt.Errorf("sandboxctl: the daemon did not create the sandbox of %s", agentID)
}

// Terminate stops the daemon (SIGTERM: it ends every session it runs),
// then removes every container of the run, the daemon's included.
func (b *daemonBackend) Terminate(ctx context.Context) error {
	var errs []error
	if b.ctr != nil && b.ws != "" {
		// The daemon (root in its container) made the workspaces; it
		// empties them, so that a test running as another user can
		// remove the directory afterwards.
		_, _, _ = b.ctr.Exec(ctx, []string{"/bin/sh", "-c", `cd "$1" && rm -rf -- * .[!.]* ..?*`, "sh", b.ws})
	}
	if b.ctr != nil {
		timeout := 20 * time.Second
		if err := b.ctr.Stop(ctx, &timeout); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandboxctl: stop the daemon: %w", err))
		}
	}
	if b.api != nil {
		b.api.hc.CloseIdleConnections()
	}
	errs = append(errs, RemoveRun(ctx, b.dc.Client, b.runID))
	if b.ws != "" {
		if err := os.RemoveAll(b.ws); err != nil {
			errs = append(errs, fmt.Errorf("sandboxctl: remove workspaces: %w", err))
		}
	}
	errs = append(errs, b.dc.Close())
	return errors.Join(errs...)
}

func resultText(r Result) string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// apiClient speaks the daemon's HTTP/JSON API: two POST endpoints with a
// bearer token. It is written here on net/http rather than importing
// sandboxctl's own client, which is internal to its module and carries
// what a test does not need (the unix socket, auto-starting a daemon).
type apiClient struct {
	base, token string
	hc          *http.Client
}

func newAPIClient(e Endpoint) *apiClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = e.TLSConfig()
	return &apiClient{base: e.URL, token: e.Token, hc: &http.Client{Transport: tr}}
}

// Endpoint implements Backend.
func (b *daemonBackend) Endpoint() (Endpoint, error) { return b.endpoint, nil }

// APIError is a non-2xx answer of the daemon.
type APIError struct {
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("sandboxctl: daemon answered %d: %s", e.StatusCode, e.Message)
}

// Is matches the containerd errdefs class of the status (400 invalid
// argument, 401 unauthenticated, 404 not found, 503 unavailable).
func (e *APIError) Is(target error) bool {
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return target == cerrdefs.ErrInvalidArgument
	case http.StatusUnauthorized:
		return target == cerrdefs.ErrUnauthenticated
	case http.StatusNotFound:
		return target == cerrdefs.ErrNotFound
	case http.StatusServiceUnavailable:
		return target == cerrdefs.ErrUnavailable
	}
	return false
}

func (c *apiClient) call(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, http.MethodPost, path, in, out)
}

func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("sandboxctl: encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("sandboxctl: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("sandboxctl: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
		return &APIError{StatusCode: resp.StatusCode, Message: msg}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("sandboxctl: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}
