package sandboxconfig

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxctl/sandboxctl/workdir"
)

// Unsafe is sandbox.docker.unsafe: the only place a config may weaken the
// sandbox's boundary. Everything it names is refused elsewhere; its name is
// what a reviewer of the config sees.
type Unsafe struct {
	// AllowCapabilities are capabilities a sandbox may keep (capDrop
	// leaves them): names like NET_RAW, or ALL for any.
	AllowCapabilities []string `yaml:"allowCapabilities" json:"allowCapabilities,omitempty"`
	// SeccompUnconfined accepts seccompProfile "unconfined" and profiles
	// that allow by default or allow a syscall Docker's default profile
	// keeps from unprivileged containers (unshare, mount, ptrace, bpf...).
	SeccompUnconfined bool `yaml:"seccompUnconfined" json:"seccompUnconfined,omitempty"`
	// ApparmorUnconfined accepts apparmorProfile "unconfined".
	ApparmorUnconfined bool `yaml:"apparmorUnconfined" json:"apparmorUnconfined,omitempty"`
	// BindSensitive are bind sources (as written in binds) accepted
	// although they hold, or lie under, a sensitive host path (the Engine's
	// and containerd's state, system directories, crontabs, the daemon's
	// own state and workspaces). The Docker socket, /proc, /sys, /dev and
	// the host root stay refused.
	BindSensitive []string `yaml:"bindSensitive" json:"bindSensitive,omitempty"`
	// FullEgress accepts sandbox.network.egress full.
	FullEgress bool `yaml:"fullEgress" json:"fullEgress,omitempty"`
}

// dockerDefaultCaps is the capability set the Engine gives a container
// that adds none (moby's oci/caps DefaultCapabilities).
var dockerDefaultCaps = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
	"NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// knownCaps are the capability names Linux defines (without CAP_).
var knownCaps = []string{
	"AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN",
	"DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
	"LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG",
	"SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE",
	"SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM",
}

func capName(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

// RetainedCaps returns the capabilities a container keeps under capDrop
// (the Engine's default set minus what is dropped), or an error for a name
// Linux does not define.
func RetainedCaps(capDrop []string) ([]string, error) {
	drop := map[string]bool{}
	for _, c := range capDrop {
		n := capName(c)
		if n != "ALL" && !slices.Contains(knownCaps, n) {
			return nil, &ConfigError{Field: "sandbox.docker.capDrop", Value: c, Msg: "not a Linux capability"}
		}
		drop[n] = true
	}
	if drop["ALL"] {
		return nil, nil
	}
	var kept []string
	for _, c := range dockerDefaultCaps {
		if !drop[c] {
			kept = append(kept, c)
		}
	}
	return kept, nil
}

func (u Unsafe) checkCaps(capDrop []string) error {
	kept, err := RetainedCaps(capDrop)
	if err != nil {
		return err
	}
	allowed := map[string]bool{}
	for _, c := range u.AllowCapabilities {
		n := capName(c)
		if n != "ALL" && !slices.Contains(knownCaps, n) {
			return &ConfigError{Field: "sandbox.docker.unsafe.allowCapabilities", Value: c, Msg: "not a Linux capability"}
		}
		allowed[n] = true
	}
	var refused []string
	for _, c := range kept {
		if !allowed["ALL"] && !allowed[c] {
			refused = append(refused, c)
		}
	}
	if len(refused) > 0 {
		return &ConfigError{Field: "sandbox.docker.capDrop", Value: strings.Join(capDrop, ","),
			Msg: fmt.Sprintf("the sandbox would keep capabilities %s; drop ALL, or list them under sandbox.docker.unsafe.allowCapabilities", strings.Join(refused, ","))}
	}
	return nil
}

// sensitiveBindSources are host paths a bind may neither lie under nor
// contain (unless named in unsafe.bindSensitive): the Engine's and
// containerd's state (every container's files and secrets), system
// directories, and the cron spools.
var sensitiveBindSources = []string{
	"/var/lib/docker", "/var/lib/containerd", "/var/lib/containers", "/var/lib/kubelet", "/var/lib/rancher",
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/containerd",
	"/var/spool/cron", "/var/spool/anacron", "/var/spool/at",
}

// BindPolicy is what a bind is judged against beyond the config itself:
// the daemon's own directories, which no sandbox may reach.
type BindPolicy struct {
	// Protected are host paths of the daemon (its state dir, the
	// workspace root): a bind may neither lie under one nor contain one.
	Protected []string
}

// sensitiveBind returns why a resolved bind source is sensitive ("").
func sensitiveBind(resolved string, protected []string) string {
	check := func(p, what string) string {
		if p == "" {
			return ""
		}
		if rp, err := resolveExisting(filepath.Clean(p)); err == nil {
			p = rp
		}
		switch {
		case workdir.ContainsPath(p, resolved):
			return fmt.Sprintf("bind source %s is under %s (%s)", resolved, p, what)
		case workdir.ContainsPath(resolved, p):
			return fmt.Sprintf("bind source %s contains %s (%s)", resolved, p, what)
		}
		return ""
	}
	for _, s := range sensitiveBindSources {
		if r := check(s, "sensitive host path"); r != "" {
			return r
		}
	}
	for _, s := range protected {
		if r := check(s, "sandboxctl's own state or workspaces"); r != "" {
			return r
		}
	}
	return ""
}

// CheckBinds judges every bind of c against the sensitive host paths and
// pol.Protected; sources named in sandbox.docker.unsafe.bindSensitive are
// let through.
func (c Config) CheckBinds(pol BindPolicy) error {
	for i, spec := range c.Docker.Binds {
		field := fmt.Sprintf("sandbox.docker.binds[%d]", i)
		b, err := ParseBind(field, spec, c.AllowedSourceRoots)
		if err != nil {
			return err
		}
		reason := sensitiveBind(b.Resolved, pol.Protected)
		if reason == "" || slices.Contains(c.Docker.Unsafe.BindSensitive, b.Source) {
			continue
		}
		return &ConfigError{Field: field, Value: spec, Msg: reason + "; name the source under sandbox.docker.unsafe.bindSensitive to bind it anyway"}
	}
	return nil
}

// checkUnsafe refuses what weakens the boundary unless Unsafe names it.
func (c Config) checkUnsafe() error {
	d := c.Docker
	if err := d.Unsafe.checkCaps(d.CapDrop); err != nil {
		return err
	}
	kept, _ := RetainedCaps(d.CapDrop)
	why, err := judgeSeccomp(d.SeccompProfile, kept)
	if err != nil {
		return err
	}
	if why != "" && !d.Unsafe.SeccompUnconfined {
		return &ConfigError{Field: "sandbox.docker.seccompProfile", Msg: why + "; set sandbox.docker.unsafe.seccompUnconfined to accept it"}
	}
	if strings.EqualFold(strings.TrimSpace(d.ApparmorProfile), "unconfined") && !d.Unsafe.ApparmorUnconfined {
		return &ConfigError{Field: "sandbox.docker.apparmorProfile", Value: d.ApparmorProfile, Msg: "unconfined profiles are refused; set sandbox.docker.unsafe.apparmorUnconfined to accept it"}
	}
	return c.CheckBinds(BindPolicy{})
}
