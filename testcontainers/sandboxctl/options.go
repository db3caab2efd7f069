package sandboxctl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"
	"go.yaml.in/yaml/v3"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Defaults of the options.
const (
	// DefaultImage is the sandbox image (images/build.sh sandbox).
	DefaultImage = "sandboxctl/sandbox:bookworm"
	// DefaultDaemonImage is the daemon image of container mode
	// (images/build.sh daemon).
	DefaultDaemonImage = "sandboxctl/sandboxctld:dev"
	// DefaultAgentID is the agent the handle's commands run as.
	DefaultAgentID = "test"
)

// ErrInvalidOption is wrapped by every error about a bad option.
var ErrInvalidOption = errors.New("sandboxctl: invalid option")

// Option is one of this module's options. It is a
// testcontainers.ContainerCustomizer, so that, as with testcontainers-go's
// own modules, Run takes this module's options and testcontainers-go's
// generic ones (testcontainers.WithEnv, WithHostConfigModifier, …) in one
// list; the generic ones apply to the daemon container.
type Option func(*Settings) error

// Customize implements testcontainers.ContainerCustomizer: an Option
// changes the Settings, not the container request.
func (Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

// Settings are the options after Run applied them; a Launcher reads them.
type Settings struct {
	// Config is the base configuration file as YAML (sandboxctl.yaml);
	// the options below are layered over it (see Settings.ConfigYAML).
	Config []byte
	// Image is sandbox.docker.image.
	Image string
	// AgentID and SessionKey are the scope of the handle's commands.
	AgentID, SessionKey string
	// Host is exec.host: sandbox (default) or gateway.
	Host vocab.Host
	// Supervisor: nil is the default of the mode (on when a supervisor
	// binary is at hand), otherwise on or off.
	Supervisor *bool
	// SupervisorBinary is the static sandboxctl-supervisor binary for the
	// in-process mode ("" finds or builds one; see package inprocess).
	SupervisorBinary string
	// Runtime is sandbox.docker.runtime ("" leaves the Engine's default).
	Runtime string
	// Labels go on every container the run creates, beside the
	// testcontainers labels (see Labels).
	Labels map[string]string
	// DaemonImage is the daemon image of container mode (Run's img).
	DaemonImage string
	// Customizers are the testcontainers-go options given to Run, for
	// the daemon container (container mode only).
	Customizers []testcontainers.ContainerCustomizer
	// Launcher starts what the test talks to (default: container mode).
	Launcher Launcher
	// TB, when set, gets a t.Cleanup that terminates the handle.
	TB testing.TB
}

// WithConfigYAML sets the base configuration (sandboxctl.yaml text).
// Unknown keys and bad values are errors naming the key and its line.
func WithConfigYAML(doc []byte) Option {
	return func(s *Settings) error {
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return fmt.Errorf("%w: config: %w", ErrInvalidOption, err)
		}
		s.Config = append([]byte(nil), doc...)
		return nil
	}
}

// WithConfig sets the base configuration from a struct that marshals to
// the YAML of sandboxctl.yaml, such as a config.File of
// github.com/sandboxctl/sandboxctl/sessions/config.
func WithConfig(cfg any) Option {
	return func(s *Settings) error {
		doc, err := yaml.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("%w: config: %w", ErrInvalidOption, err)
		}
		s.Config = doc
		return nil
	}
}

// WithImage sets the sandbox image (sandbox.docker.image).
func WithImage(ref string) Option {
	return func(s *Settings) error {
		if strings.TrimSpace(ref) == "" {
			return fmt.Errorf("%w: image: empty reference", ErrInvalidOption)
		}
		s.Image = ref
		return nil
	}
}

// WithAgentID sets the agent the handle's commands run as (its sandbox
// scope); default "test".
func WithAgentID(id string) Option {
	return func(s *Settings) error {
		if strings.TrimSpace(id) == "" {
			return fmt.Errorf("%w: agent id: empty", ErrInvalidOption)
		}
		s.AgentID = id
		return nil
	}
}

// WithSessionKey sets the session key of the handle's commands.
func WithSessionKey(key string) Option {
	return func(s *Settings) error { s.SessionKey = key; return nil }
}

// WithHost picks where the handle's commands run: vocab.HostSandbox (a
// hardened container per agent, the default) or vocab.HostGateway (the
// daemon's own machine: the test process in-process, the daemon container
// in container mode).
func WithHost(host vocab.Host) Option {
	return func(s *Settings) error {
		switch host {
		case vocab.HostSandbox, vocab.HostGateway:
			s.Host = host
			return nil
		}
		return fmt.Errorf("%w: host %q (want sandbox or gateway)", ErrInvalidOption, host)
	}
}

// WithSupervisor turns the in-container supervisor on or off.
func WithSupervisor(on bool) Option {
	return func(s *Settings) error { s.Supervisor = &on; return nil }
}

// WithSupervisorBinary names the sandboxctl-supervisor binary of the
// in-process mode.
func WithSupervisorBinary(path string) Option {
	return func(s *Settings) error { s.SupervisorBinary = path; return nil }
}

// WithRuntime sets the OCI runtime of sandboxes (sandbox.docker.runtime,
// e.g. "runc" or "runsc"); a sandboxctl without that key refuses it by
// name.
func WithRuntime(name string) Option {
	return func(s *Settings) error {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("%w: runtime: empty", ErrInvalidOption)
		}
		s.Runtime = name
		return nil
	}
}

// WithLabels adds labels to every container the run creates.
func WithLabels(labels map[string]string) Option {
	return func(s *Settings) error {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		for k, v := range labels {
			if k == "" || strings.ContainsAny(k, ",=") || strings.Contains(v, ",") {
				return fmt.Errorf("%w: label %q=%q: keys may not be empty or hold ',' or '=', values may not hold ','", ErrInvalidOption, k, v)
			}
			if strings.HasPrefix(k, "sandboxctl.") && !strings.HasPrefix(k, "sandboxctl.test") {
				return fmt.Errorf("%w: label %q: the sandboxctl.* labels name a sandbox's owner and config; only sandboxctl.test* keys are free", ErrInvalidOption, k)
			}
			s.Labels[k] = v
		}
		return nil
	}
}

// WithLauncher picks the mode: package inprocess has the in-process one;
// the default is container mode (ContainerMode).
func WithLauncher(l Launcher) Option {
	return func(s *Settings) error { s.Launcher = l; return nil }
}

// WithTB registers Terminate with tb.Cleanup, so the sandbox is gone when
// the test ends.
func WithTB(tb testing.TB) Option {
	return func(s *Settings) error { s.TB = tb; return nil }
}

// ConfigYAML returns the configuration to run with: Config with the
// options and set (dotted key paths, such as "sandbox.workspaceRoot")
// layered over it.
func (s Settings) ConfigYAML(set map[string]any) ([]byte, error) {
	doc := map[string]any{}
	if len(s.Config) > 0 {
		if err := yaml.Unmarshal(s.Config, &doc); err != nil {
			return nil, fmt.Errorf("%w: config: %w", ErrInvalidOption, err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	}
	layers := map[string]any{}
	if s.Image != "" {
		layers["sandbox.docker.image"] = s.Image
	}
	if s.Host != "" {
		layers["exec.host"] = string(s.Host)
	}
	if s.Runtime != "" {
		layers["sandbox.docker.runtime"] = s.Runtime
	}
	for k, v := range set {
		layers[k] = v
	}
	for path, v := range layers {
		if err := setPath(doc, strings.Split(path, "."), v); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(doc)
}

// setPath sets doc[a][b]...=v, creating the maps on the way.
func setPath(doc map[string]any, keys []string, v any) error {
	for i, k := range keys[:len(keys)-1] {
		next, ok := doc[k]
		if !ok || next == nil {
			m := map[string]any{}
			doc[k] = m
			doc = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("%w: config: %s is a %T, not a section", ErrInvalidOption, strings.Join(keys[:i+1], "."), next)
		}
		doc = m
	}
	doc[keys[len(keys)-1]] = v
	return nil
}

func (s Settings) host() vocab.Host {
	if s.Host != "" {
		return s.Host
	}
	var doc struct {
		Exec struct {
			Host string `yaml:"host"`
		} `yaml:"exec"`
	}
	if yaml.Unmarshal(s.Config, &doc) == nil && doc.Exec.Host != "" {
		if h, err := vocab.ParseHost(doc.Exec.Host); err == nil {
			return h
		}
	}
	return vocab.HostSandbox
}
