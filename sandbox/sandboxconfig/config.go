// Package sandboxconfig is the `sandbox:` section of sandboxctl.yaml: its
// types, defaults and validation (every refusal of README, "Configuration" — blocked binds,
// network host, unconfined profiles, credential-looking env, bad resource
// values). It depends on no Docker client, so light programs such as the
// sandboxctl CLI can load and check a config; package sandbox re-exports it.
package sandboxconfig

import (
	"fmt"

	"github.com/docker/go-units"
)

// Config is the `sandbox:` section of sandboxctl.yaml (README, "Configuration").
type Config struct {
	Scope           string       `yaml:"scope" json:"scope"`                     // session | agent | shared
	WorkspaceAccess string       `yaml:"workspaceAccess" json:"workspaceAccess"` // none | ro | rw
	WorkspaceRoot   string       `yaml:"workspaceRoot" json:"workspaceRoot"`
	Prune           PruneConfig  `yaml:"prune" json:"prune"`
	Docker          DockerConfig `yaml:"docker" json:"docker"`
	// Network is how sandboxes reach the network (egress allowlist,
	// docs/egress.md).
	Network NetworkConfig `yaml:"network" json:"network"`
	// AllowedSourceRoots, when non-empty, limits bind sources to these roots.
	AllowedSourceRoots []string `yaml:"allowedSourceRoots" json:"allowedSourceRoots"`
	// Pool keeps started sandboxes ready for new scopes.
	Pool PoolConfig `yaml:"pool" json:"pool"`
	// PauseAfterMinutes pauses a sandbox (the Engine's cgroup freezer)
	// idle that long; the next command resumes it. 0: never.
	PauseAfterMinutes float64 `yaml:"pauseAfterMinutes" json:"pauseAfterMinutes"`
	// Engines are the Docker Engines sandboxes are placed on; none is the
	// one Engine of the environment (see ParseEngines).
	Engines []EngineConfig `yaml:"engines" json:"engines,omitempty"`
	// Kubernetes runs sandboxes as Pods of a cluster instead (when enabled).
	Kubernetes KubernetesConfig `yaml:"kubernetes" json:"kubernetes"`
	// MaxPerAgent caps the sandboxes one agent id holds at once (with
	// scope session an agent makes one per session key it invents);
	// default DefaultMaxPerAgent.
	MaxPerAgent int `yaml:"maxPerAgent" json:"maxPerAgent"`
	// Max caps the sandboxes of this daemon at once; 0 derives it from
	// the machine's memory (see EffectiveMax).
	Max int `yaml:"max" json:"max"`
	// WorkspaceQuota, e.g. "1g", gives each read-write workspace a volume
	// of that size of its own (a loop-mounted ext4 image; needs a root
	// daemon); "" leaves workspaces on the host filesystem without a cap.
	WorkspaceQuota string `yaml:"workspaceQuota" json:"workspaceQuota,omitempty"`
	// Identity is where sandbox identities come from (IdentityConfig).
	Identity IdentityConfig `yaml:"identity" json:"identity,omitzero"`
	// Templates are the named variants of the top-level container
	// settings a sandbox can be created from (POST /v1/sandboxes); the
	// top-level settings are the template DefaultTemplate.
	Templates map[string]Template `yaml:"templates" json:"templates,omitempty"`
	// Explicit: an agent's command never creates its sandbox; one must be
	// created first (sandboxctl sandbox create, POST /v1/sandboxes).
	Explicit bool `yaml:"explicit" json:"explicit"`
	// Snapshots bounds the snapshots kept under the state directory
	// (docs/snapshots.md).
	Snapshots SnapshotsConfig `yaml:"snapshots" json:"snapshots"`
	// Secrets are the credentials the egress proxy adds to requests to
	// their hosts; the sandbox sees placeholders (docs/secrets.md).
	Secrets map[string]SecretConfig `yaml:"secrets" json:"secrets,omitempty"`
	// SecretsUpstreamCAFile, a PEM file, adds CAs to the system roots the
	// credential broker verifies a secret's upstream with ("" adds none).
	SecretsUpstreamCAFile string `yaml:"secretsUpstreamCAFile" json:"secretsUpstreamCAFile,omitempty"`
}

// SnapshotsConfig is sandbox.snapshots: at most MaxCount snapshots per
// scope and MaxBytes (a size such as 10g) of snapshots in all.
type SnapshotsConfig struct {
	MaxCount int    `yaml:"maxCount" json:"maxCount"`
	MaxBytes string `yaml:"maxBytes" json:"maxBytes"`
}

// MaxBytesValue is MaxBytes in bytes.
func (s SnapshotsConfig) MaxBytesValue() (int64, error) {
	n, err := units.RAMInBytes(s.MaxBytes)
	if err != nil || n <= 0 {
		return 0, &ConfigError{Field: "sandbox.snapshots.maxBytes", Value: s.MaxBytes, Msg: "must be a size above 0, such as 10g"}
	}
	return n, nil
}

// DefaultMaxPerAgent is sandbox.maxPerAgent's default.
const DefaultMaxPerAgent = 4

// PoolConfig is sandbox.pool: Size started, supervised sandboxes are kept
// ready per configuration; the first command of a new scope takes one.
// 0 disables the pool.
type PoolConfig struct {
	Size int `yaml:"size" json:"size"`
}

// MaxPoolSize bounds sandbox.pool.size.
const MaxPoolSize = 64

// PruneConfig says when idle or old sandboxes are removed; 0 disables each rule.
type PruneConfig struct {
	IdleHours  float64 `yaml:"idleHours" json:"idleHours"`
	MaxAgeDays float64 `yaml:"maxAgeDays" json:"maxAgeDays"`
}

// DockerConfig shapes the container; every field takes part in the config hash.
type DockerConfig struct {
	Image string `yaml:"image" json:"image"`
	// Runtime is the Engine's OCI runtime for the container ("" = the
	// Engine's default, normally runc; "runsc" = gVisor with no network,
	// "runsc-net" = gVisor on the container's network). It must be one
	// the Engine lists (docker info).
	Runtime         string   `yaml:"runtime" json:"runtime,omitempty"`
	ContainerPrefix string   `yaml:"containerPrefix" json:"containerPrefix"`
	ReadOnlyRoot    bool     `yaml:"readOnlyRoot" json:"readOnlyRoot"`
	Tmpfs           []string `yaml:"tmpfs" json:"tmpfs"`
	Network         string   `yaml:"network" json:"network"`
	// User runs every process of the sandbox; "" is DefaultUser (see
	// EffectiveUser), "root" or "0" runs them as root (capabilities are
	// dropped all the same).
	User            string            `yaml:"user" json:"user"`
	CapDrop         []string          `yaml:"capDrop" json:"capDrop"`
	Env             map[string]string `yaml:"env" json:"env"`
	SetupCommand    string            `yaml:"setupCommand" json:"setupCommand"`
	PidsLimit       int64             `yaml:"pidsLimit" json:"pidsLimit"`
	Memory          string            `yaml:"memory" json:"memory"`
	MemorySwap      string            `yaml:"memorySwap" json:"memorySwap"`
	CPUs            float64           `yaml:"cpus" json:"cpus"`
	Ulimits         map[string]string `yaml:"ulimits" json:"ulimits"` // name -> "soft[:hard]"
	SeccompProfile  string            `yaml:"seccompProfile" json:"seccompProfile"`
	ApparmorProfile string            `yaml:"apparmorProfile" json:"apparmorProfile"`
	DNS             []string          `yaml:"dns" json:"dns"`
	ExtraHosts      []string          `yaml:"extraHosts" json:"extraHosts"`
	Binds           []string          `yaml:"binds" json:"binds"` // "src:dst[:ro|rw]"
	// Unsafe names every setting above that weakens the boundary and is
	// accepted anyway; without it such settings are refused.
	Unsafe Unsafe `yaml:"unsafe" json:"unsafe,omitzero"`
}

// DefaultImage is the sandbox image built by `make images`.
const DefaultImage = "sandboxctl/sandbox:bookworm"

// DefaultConfig returns the defaults of README, "Configuration".
func DefaultConfig() Config {
	return Config{
		Scope:           "agent",
		WorkspaceAccess: "rw",
		WorkspaceRoot:   "",
		Prune:           PruneConfig{IdleHours: 24, MaxAgeDays: 7},
		MaxPerAgent:     DefaultMaxPerAgent,
		Templates:       map[string]Template{},
		Secrets:         map[string]SecretConfig{},
		Snapshots:       SnapshotsConfig{MaxCount: 20, MaxBytes: "10g"},
		Network:         NetworkConfig{Egress: EgressNone, Agents: map[string][]AllowRule{}},
		Kubernetes:      DefaultKubernetes(),
		Docker: DockerConfig{
			Image:           DefaultImage,
			ContainerPrefix: "sandboxctl-",
			ReadOnlyRoot:    true,
			// Sized: a tmpfs is charged to the memory limit (SECURITY.md).
			Tmpfs:     []string{"/tmp:size=256m", "/var/tmp:size=64m", "/run:size=16m"},
			Network:   "none",
			CapDrop:   []string{"ALL"},
			Env:       map[string]string{"LANG": "C.UTF-8"},
			PidsLimit: 256,
			Memory:    "1g",
			// No swap beyond the memory limit.
			MemorySwap: "1g",
			CPUs:       1,
		},
	}
}

// DefaultUser is the uid:gid sandboxes run as when sandbox.docker.user is
// empty and the daemon runs as root; a daemon of another uid runs them as
// its own uid:gid, so the workspace on the host stays the user's own.
const DefaultUser = "1000:1000"

// EffectiveUser is the user sandboxes run as for the configured one, given
// the daemon's effective uid and gid.
func EffectiveUser(configured string, euid, egid int) string {
	if configured != "" {
		return configured
	}
	if euid == 0 {
		return DefaultUser
	}
	return fmt.Sprintf("%d:%d", euid, egid)
}
