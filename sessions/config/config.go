// Package config loads sandboxctl.yaml (README, "Configuration"): every key has a default,
// unknown keys and bad values are errors naming the key and its line, and the
// SANDBOXCTL_* (and PI_BASH_*) environment overrides are applied on top.
package config

import (
	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit/policy"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// File is the whole configuration file.
type File struct {
	Exec     Exec                 `yaml:"exec" json:"exec"`
	Elevated Elevated             `yaml:"elevated" json:"elevated"`
	Sandbox  sandboxconfig.Config `yaml:"sandbox" json:"sandbox"`
	// Limits are the per-agent and global quotas that keep one agent from
	// taking the daemon or its neighbours down.
	Limits Limits `yaml:"limits" json:"limits"`
	// Audit is the audit trail (docs/audit.md).
	Audit Audit `yaml:"audit" json:"audit"`
	// MCP is what the MCP server offers beyond the tools.
	MCP MCP `yaml:"mcp" json:"mcp"`
	// Previews expose ports of sandboxes through the daemon's TCP
	// listener (docs/previews.md).
	Previews Previews `yaml:"previews" json:"previews"`
	// State is the state directory: approvals.json, sandbox registry, session
	// logs, the daemon socket and pid file.
	State string `yaml:"state" json:"state"`
}

// MCP is the `mcp:` section.
type MCP struct {
	// SandboxLifecycle adds sandbox_create, sandbox_info and
	// sandbox_delete to the daemon's MCP server (/mcp): an agent may then
	// create and remove its own sandbox.
	SandboxLifecycle bool `yaml:"sandboxLifecycle" json:"sandboxLifecycle"`
}

// Previews is the `previews:` section.
type Previews struct {
	// Enabled serves POST/GET/DELETE /v1/previews and the previews
	// themselves under /preview/ on the daemon's TCP listener (--listen):
	// a port of a sandbox behind a token of its own. Off by default.
	Enabled bool `yaml:"enabled" json:"enabled"`
}

// Exec is the `exec:` section.
type Exec struct {
	Host                     vocab.Host     `yaml:"host" json:"host"`         // sandbox | gateway | node
	Security                 vocab.Security `yaml:"security" json:"security"` // deny | allowlist | full
	Ask                      vocab.Ask      `yaml:"ask" json:"ask"`           // off | on-miss | always
	AskFallback              vocab.Security `yaml:"askFallback" json:"askFallback"`
	Node                     string         `yaml:"node" json:"node"`
	PathPrepend              []string       `yaml:"pathPrepend" json:"pathPrepend"`
	SafeBins                 []string       `yaml:"safeBins" json:"safeBins"`
	BackgroundMs             int            `yaml:"backgroundMs" json:"backgroundMs"`
	TimeoutSec               int            `yaml:"timeoutSec" json:"timeoutSec"`
	CleanupMs                int            `yaml:"cleanupMs" json:"cleanupMs"` // finished-session TTL (jobTtlMs)
	NotifyOnExit             bool           `yaml:"notifyOnExit" json:"notifyOnExit"`
	NotifyOnExitEmptySuccess bool           `yaml:"notifyOnExitEmptySuccess" json:"notifyOnExitEmptySuccess"`
	MaxOutputChars           int            `yaml:"maxOutputChars" json:"maxOutputChars"`
	PendingMaxOutputChars    int            `yaml:"pendingMaxOutputChars" json:"pendingMaxOutputChars"`
	// BackgroundTimeoutSec, when > 0, applies to backgrounded runs that gave
	// no explicit timeout (by default they have none).
	BackgroundTimeoutSec int `yaml:"backgroundTimeoutSec" json:"backgroundTimeoutSec"`
	// Cwd is the default working directory on the gateway ("" = daemon cwd).
	// When set, it is also the workspace of the external-directory check.
	Cwd string `yaml:"cwd" json:"cwd"`
	// ApprovalTimeoutSec is how long an approval request waits for a human
	// before askFallback applies (default 120).
	ApprovalTimeoutSec int `yaml:"approvalTimeoutSec" json:"approvalTimeoutSec"`
	// ApprovalHook, when set, is an operator's program (absolute path) run
	// for each approval request with the request as JSON on stdin; a first
	// output line of allow-once, allow-always or deny decides it, anything
	// else leaves it to a human.
	ApprovalHook string `yaml:"approvalHook" json:"approvalHook"`
	// Envelope is what every gateway command runs inside.
	Envelope Envelope `yaml:"envelope" json:"envelope"`
}

// Envelope is the `exec.envelope:` section (hostexec.Envelope): the
// identity, the writable directories and the secret locations of gateway
// commands.
type Envelope struct {
	// Enabled (default true) runs every gateway command in the envelope.
	// false runs them as the daemon's own user (root, for a root daemon)
	// with only the guard and the external-directory check, as before
	// issue 25: only for agents that are trusted with that user.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// UID and GID are the identity gateway commands run as when the daemon
	// is root (default hostapi.DefaultGatewayUID:DefaultGatewayGID, 61000:61000). No account,
	// group or subordinate-id range may use them (checked at start). A
	// non-root daemon cannot switch: its commands keep its uid.
	UID int `yaml:"uid" json:"uid"`
	GID int `yaml:"gid" json:"gid"`
	// Writable are directories gateway commands may write besides
	// exec.cwd (absolute; ~ is the daemon's home).
	Writable []string `yaml:"writable" json:"writable"`
	// Secrets are paths gateway commands may not read, besides the
	// built-in ones (hostexec.DefaultSecrets).
	Secrets []string `yaml:"secrets" json:"secrets"`
}

// Limits is the `limits:` section. Every value is a positive whole number;
// a per-agent cap may not exceed its global one.
type Limits struct {
	Approvals ApprovalLimits `yaml:"approvals" json:"approvals"`
	Sessions  SessionLimits  `yaml:"sessions" json:"sessions"`
}

// ApprovalLimits bound approvals.json.
type ApprovalLimits struct {
	// PendingPerAgent and Pending cap the requests awaiting a decision.
	PendingPerAgent int `yaml:"pendingPerAgent" json:"pendingPerAgent"`
	Pending         int `yaml:"pending" json:"pending"`
	// RequestBytes caps one request's command line plus environment.
	RequestBytes int `yaml:"requestBytes" json:"requestBytes"`
	// Retained caps the finished requests kept for the record.
	Retained int `yaml:"retained" json:"retained"`
}

// SessionLimits bound the exec sessions the daemon holds.
type SessionLimits struct {
	// RunningPerAgent and Running cap the sessions not yet finished.
	RunningPerAgent int `yaml:"runningPerAgent" json:"runningPerAgent"`
	Running         int `yaml:"running" json:"running"`
	// RetainedPerAgent and Retained cap the finished sessions kept for
	// polling (until cleanupMs); beyond them the oldest finished go first.
	RetainedPerAgent int `yaml:"retainedPerAgent" json:"retainedPerAgent"`
	Retained         int `yaml:"retained" json:"retained"`
}

// Audit is the `audit:` section: the append-only, hash-chained audit
// log under <state>/audit (docs/audit.md).
type Audit struct {
	// Enabled keeps the log (default true: who ran what must be
	// answerable later, and a record costs one write).
	Enabled bool `yaml:"enabled" json:"enabled"`
	// MaxSegmentBytes rotates a segment at this size; MaxBytes bounds all
	// segments together (the oldest go first).
	MaxSegmentBytes int64 `yaml:"maxSegmentBytes" json:"maxSegmentBytes"`
	MaxBytes        int64 `yaml:"maxBytes" json:"maxBytes"`
	// OnFailure is what happens when a record cannot be written: refuse
	// (commands and transfers are refused) or alert (they go on; a metric
	// and the log say so).
	OnFailure policy.FailureMode `yaml:"onFailure" json:"onFailure"`
	// SigningKey is an ed25519 private key file (PEM, PKCS #8) signing
	// each closed segment's last hash; "": none.
	SigningKey string `yaml:"signingKey" json:"signingKey"`
}

// Elevated is the `elevated:` section.
type Elevated struct {
	Enabled      bool                `yaml:"enabled" json:"enabled"`
	AllowFrom    []string            `yaml:"allowFrom" json:"allowFrom"` // agent ids allowed to ask for elevated
	DefaultLevel vocab.ElevatedLevel `yaml:"defaultLevel" json:"defaultLevel"`
}

// ClientSettings are the exec settings a client applies itself, which the
// daemon records for its clients (api.DaemonConfig.Exec).
func (e Exec) ClientSettings() api.ExecSettings {
	return api.ExecSettings{Host: string(e.Host), Cwd: e.Cwd, TimeoutSec: e.TimeoutSec}
}

// Default returns the configuration with every default of README, "Configuration".
func Default() File {
	return File{
		Exec: Exec{
			Host:                  vocab.HostSandbox,
			Security:              vocab.SecurityAllowlist,
			Ask:                   vocab.AskOnMiss,
			AskFallback:           vocab.SecurityDeny,
			PathPrepend:           []string{},
			SafeBins:              []string{"cut", "uniq", "head", "tail", "tr", "wc"},
			BackgroundMs:          10000,
			TimeoutSec:            1800,
			CleanupMs:             1800000,
			NotifyOnExit:          true,
			MaxOutputChars:        200000,
			PendingMaxOutputChars: 30000,
			ApprovalTimeoutSec:    120,
			Envelope: Envelope{
				Enabled: true,
				UID:     hostapi.DefaultGatewayUID, GID: hostapi.DefaultGatewayGID,
				Writable: []string{}, Secrets: []string{},
			},
		},
		Elevated: Elevated{Enabled: false, AllowFrom: []string{}, DefaultLevel: vocab.ElevatedAsk},
		Sandbox:  sandboxconfig.DefaultConfig(),
		Limits: Limits{
			Approvals: ApprovalLimits{PendingPerAgent: 8, Pending: 64, RequestBytes: 64 << 10, Retained: 512},
			Sessions:  SessionLimits{RunningPerAgent: 32, Running: 256, RetainedPerAgent: 64, Retained: 512},
		},
		Audit: Audit{Enabled: true, MaxSegmentBytes: policy.DefaultMaxSegmentBytes, MaxBytes: policy.DefaultMaxBytes,
			OnFailure: policy.Refuse},
		State: "~/.sandboxctl",
	}
}
