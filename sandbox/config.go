package sandbox

import "github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"

// The `sandbox:` section of the config lives in package sandboxconfig (no
// Docker client, so light programs can load it); these are its names here.
type (
	// Config is the `sandbox:` section of sandboxctl.yaml (README, "Configuration").
	Config = sandboxconfig.Config
	// PruneConfig says when idle or old sandboxes are removed.
	PruneConfig = sandboxconfig.PruneConfig
	// DockerConfig shapes the container.
	DockerConfig = sandboxconfig.DockerConfig
	// Bind is one parsed `src:dst[:mode]` entry of sandbox.docker.binds.
	Bind = sandboxconfig.Bind
	// ConfigError is an ErrInvalidConfig naming the offending setting.
	ConfigError = sandboxconfig.ConfigError
	// Template is one entry of sandbox.templates.
	Template = sandboxconfig.Template
)

// DefaultImage is the image sandboxes run unless configured otherwise.
const DefaultImage = sandboxconfig.DefaultImage

// DefaultConfig returns the built-in sandbox settings.
func DefaultConfig() Config { return sandboxconfig.DefaultConfig() }

// ParseBind parses and checks one bind spec; see sandboxconfig.ParseBind.
func ParseBind(field, spec string, allowedRoots []string) (Bind, error) {
	return sandboxconfig.ParseBind(field, spec, allowedRoots)
}

// DefaultUser is the uid:gid sandboxes run as under a root daemon when
// sandbox.docker.user is empty.
const DefaultUser = sandboxconfig.DefaultUser

// Unsafe is sandbox.docker.unsafe: what weakens the boundary and is
// accepted anyway.
type Unsafe = sandboxconfig.Unsafe

// NetworkConfig is sandbox.network; AllowRule one of its allow rules
// (docs/egress.md).
type (
	NetworkConfig = sandboxconfig.NetworkConfig
	AllowRule     = sandboxconfig.AllowRule
)
