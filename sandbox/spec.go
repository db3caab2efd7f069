package sandbox

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/sandboxctl/sandboxctl/egress/broker"
	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// Label keys put on every managed container.
const (
	LabelManaged    = "sandboxctl.managed"
	LabelScopeKey   = "sandboxctl.scopeKey"
	LabelAgentID    = "sandboxctl.agentId"
	LabelSessionKey = "sandboxctl.sessionKey"
	LabelCreatedAt  = "sandboxctl.createdAtMs"
	LabelConfigHash = "sandboxctl.configHash"
	LabelConfig     = "sandboxctl.config"
)

// HomeDir is HOME inside sandboxes: the root filesystem is read-only, so HOME
// lives on the /tmp tmpfs.
const HomeDir = "/tmp"

// Scope identifies the caller whose sandbox is wanted.
type Scope struct {
	AgentID    string
	SessionKey string
}

// ScopeKey returns the key that picks the container for s under the
// configured scope mode: "session:<agent>/<key>" (both quoted, so that two
// agents using the same session key never share a container or a
// workspace), "agent:<id>" or "shared".
func ScopeKey(mode string, s Scope) string {
	switch mode {
	case "session":
		if s.SessionKey != "" {
			return "session:" + strconv.Quote(orDefault(s.AgentID)) + "/" + strconv.Quote(s.SessionKey)
		}
		return "agent:" + orDefault(s.AgentID)
	case "shared":
		return "shared"
	default:
		return "agent:" + orDefault(s.AgentID)
	}
}

func orDefault(id string) string {
	if id == "" {
		return "default"
	}
	return id
}

var slugReplace = regexp.MustCompile(`[^a-z0-9._-]+`)

// Slug lowercases key, replaces runs of other characters with "-" and keeps
// at most 32 characters.
func Slug(key string) string {
	s := slugReplace.ReplaceAllString(strings.ToLower(key), "-")
	s = strings.Trim(s, "-")
	if len(s) > 32 {
		s = strings.TrimRight(s[:32], "-")
	}
	if s == "" {
		s = "sandbox"
	}
	return s
}

// ContainerName is prefix + slug(scopeKey) + "-" + sha1(scopeKey)[:8],
// at most 63 characters.
func ContainerName(prefix, scopeKey string) string {
	sum := sha1.Sum([]byte(scopeKey))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	name := prefix + Slug(scopeKey)
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// layout is where a scope's workspace lives on the host and how it is mounted.
type layout struct {
	Access        workdir.Access `json:"access"`
	AgentDir      string         `json:"agentDir"`      // the agent workspace on the host
	SandboxDir    string         `json:"sandboxDir"`    // the sandbox-owned dir (none/ro)
	WorkspaceHost string         `json:"workspaceHost"` // what is mounted at /workspace
}

// shape is everything that shapes a container; its canonical JSON is hashed.
type shape struct {
	Docker DockerConfig `json:"docker"`
	Layout layout       `json:"layout"`
	Roots  []string     `json:"allowedSourceRoots,omitempty"`
	// Supervisor is the hash of the supervisor binary that is the main
	// process ("" on the plain path): a new binary recreates sandboxes.
	Supervisor string `json:"supervisor,omitempty"`
	// Identity is sandbox.identity.uidRange when sandbox identities are in
	// force (then Docker.User is empty); ident is the container's own pair,
	// picked at creation and kept in its LabelIdentity (not hashed).
	Identity string `json:"identity,omitempty"`
	// Broker is the credential broker's side of every sandbox when
	// secrets are configured: placeholder and CA variables, the CA files.
	Broker *broker.SandboxSide `json:"broker,omitempty"`
	// Egress is sandbox.network.egress when it is allowlist: the sandbox
	// sits on an internal network of its own (egress, not hashed, says
	// which; the policy itself is the gateway's and needs no new
	// container).
	Egress   string `json:"egress,omitempty"`
	egress   *egressAttach
	ident    *supervisor.Identity
	accounts *identityAccounts
}

// configHash is the sha1 of the canonical JSON of sh (encoding/json sorts map
// keys, so equal configs hash equally).
func configHash(sh shape) (hash string, canonical []byte) {
	canonical, err := json.Marshal(sh)
	if err != nil {
		// shape holds only strings, numbers, slices and maps of strings.
		panic(fmt.Sprintf("sandbox: config shape not encodable: %v", err))
	}
	sum := sha1.Sum(canonical)
	return hex.EncodeToString(sum[:]), canonical
}

// containerEnv is the env of the container: never the host's. The
// broker's variables (placeholders, never values) come last.
func containerEnv(d DockerConfig, b *broker.SandboxSide) []string {
	base := []string{"PATH=" + envguard.DefaultSandboxPath, "HOME=" + HomeDir}
	env := envguard.Merge(base, d.Env)
	if b != nil {
		env = envguard.Merge(env, b.Env)
	}
	return env
}

// createSpec builds the Engine create request for a scope.
func createSpec(sh shape, name string, labels map[string]string) (*container.Config, *container.HostConfig, error) {
	d := sh.Docker
	res, err := sandboxconfig.ParseResources(d)
	if err != nil {
		return nil, nil, err
	}
	tmpfsList, err := sandboxconfig.ParseTmpfsList(d)
	if err != nil {
		return nil, nil, err
	}
	// A tmpfs over a directory of the image takes that directory's owner
	// and mode (/run: root, 0755); a sandbox user given by number owns
	// them instead, so the supervisor can keep its state in /run.
	owner := ""
	if uid, gid, ok := workdir.NumericUser(d.User); ok && uid != 0 {
		owner = fmt.Sprintf(",uid=%d", uid)
		if gid >= 0 {
			owner += fmt.Sprintf(",gid=%d", gid)
		}
	}
	supervised := sh.Supervisor != ""
	runOwner := owner
	if id := sh.ident; id != nil {
		// A sandbox identity: the command uid owns the tmpfs mounts; /run,
		// where the supervisor keeps its state and socket, is the
		// supervisor uid's (its state directory is 0700 in it).
		owner = fmt.Sprintf(",uid=%d,gid=%d", id.Command, id.Command)
		runOwner = owner
		if supervised {
			runOwner = fmt.Sprintf(",uid=%d,gid=%d", id.Supervisor, id.Supervisor)
		}
	}
	tmpfs := make(map[string]string, len(tmpfsList))
	for _, t := range tmpfsList {
		if t.Path == "/run" {
			tmpfs[t.Path] = t.MountOptions() + runOwner
			continue
		}
		tmpfs[t.Path] = t.MountOptions() + owner
	}
	secOpt := []string{"no-new-privileges"}
	if d.SeccompProfile != "" {
		secOpt = append(secOpt, "seccomp="+d.SeccompProfile)
	}
	if d.ApparmorProfile != "" {
		secOpt = append(secOpt, "apparmor="+d.ApparmorProfile)
	}
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: sh.Layout.WorkspaceHost, Target: workdir.ContainerWorkspace}}
	if sh.Layout.Access == workdir.AccessRO {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: sh.Layout.AgentDir, Target: workdir.ContainerAgent, ReadOnly: true})
	}
	if a := sh.accounts; a != nil {
		mounts = append(mounts,
			mount.Mount{Type: mount.TypeBind, Source: a.Passwd, Target: "/etc/passwd", ReadOnly: true},
			mount.Mount{Type: mount.TypeBind, Source: a.Group, Target: "/etc/group", ReadOnly: true})
	}
	if b := sh.Broker; b != nil {
		mounts = append(mounts,
			mount.Mount{Type: mount.TypeBind, Source: b.BundleFile, Target: broker.SandboxBundlePath, ReadOnly: true},
			mount.Mount{Type: mount.TypeBind, Source: b.CAFile, Target: broker.SandboxCAPath, ReadOnly: true})
	}
	for i, spec := range d.Binds {
		b, err := ParseBind(fmt.Sprintf("sandbox.docker.binds[%d]", i), spec, sh.Roots)
		if err != nil {
			return nil, nil, err
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.Resolved, Target: b.Target, ReadOnly: b.ReadOnly})
	}
	init := true
	pids := d.PidsLimit
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(d.Network),
		Runtime:        d.Runtime,
		CapDrop:        d.CapDrop,
		SecurityOpt:    secOpt,
		ReadonlyRootfs: d.ReadOnlyRoot,
		Tmpfs:          tmpfs,
		Mounts:         mounts,
		Init:           &init,
		DNS:            res.DNS,
		ExtraHosts:     d.ExtraHosts,
		Resources: container.Resources{
			Memory:     res.Memory,
			MemorySwap: res.MemorySwap,
			NanoCPUs:   res.NanoCPUs,
			Ulimits:    res.Ulimits,
		},
	}
	if pids > 0 {
		hc.Resources.PidsLimit = &pids
		if gvisorRuntime(d.Runtime) {
			// Under gVisor the pids cgroup counts the sandbox kernel's
			// host tasks (its threads, and a ptrace stub per address
			// space: ~10 per sandbox process here), not the sandbox's
			// processes; reaching it makes the sentry panic and the whole
			// sandbox die. The limit is scaled so that pidsLimit sandbox
			// processes fit (SECURITY.md: under gVisor a fork bomb ends
			// the sandbox instead of failing forks).
			host := pids*runscTasksPerProcess + runscBaseTasks
			hc.Resources.PidsLimit = &host
		}
	}
	if supervised {
		// The supervisor speaks its protocol on stdin/stdout, reached
		// through the Engine's attach stream; stdin stays open across
		// attaches, and stdout is not logged by the Engine.
		hc.LogConfig = container.LogConfig{Type: "none"}
		// The supervisor is pid 1 itself, with no docker-init above it:
		// docker-init is dumpable and holds the attach stream as its fd 0,
		// so any process of the sandbox could open /proc/1/fd/0 and write
		// frames into the daemon's control stream. The supervisor is not
		// dumpable, so without CAP_SYS_PTRACE its descriptors cannot be
		// opened; it reaps orphans and handles SIGTERM itself.
		noInit := false
		hc.Init = &noInit
	}
	cfg := &container.Config{
		Image:      d.Image,
		Cmd:        []string{"sleep", "infinity"},
		WorkingDir: workdir.ContainerWorkspace,
		Env:        containerEnv(d, sh.Broker),
		User:       d.User,
		Labels:     labels,
		Hostname:   strings.TrimSuffix(name[:min(len(name), 63)], "-"),
	}
	if id := sh.ident; id != nil {
		cfg.User = fmt.Sprintf("%d:%d", id.Command, id.Command)
	}
	if sh.Egress != "" {
		a := sh.egress
		if a == nil {
			return nil, nil, fmt.Errorf("sandbox %s: egress allowlist without its network: %w", name, ErrInvalidConfig)
		}
		// The internal network's only peer is the gateway; the resolver is
		// the gateway's; no IPv6 at all (not even link-local to the host).
		hc.NetworkMode = container.NetworkMode(a.Network)
		hc.DNS = []netip.Addr{a.Gateway}
		hc.Sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
		cfg.Env = envguard.Merge(cfg.Env, egressEnv(a))
	}
	if supervised {
		// An image ENTRYPOINT must not wrap the supervisor.
		cfg.Entrypoint, cfg.Cmd = []string{SupervisorPath}, nil
		if id := sh.ident; id != nil {
			// Started as root with only the supervisor's capabilities, it
			// becomes the supervisor uid before anything else runs, and
			// forks every command as the command uid with none
			// (supervisor.Identity). An Engine exec into it names the
			// command uid (execUser).
			cfg.User = "0:0"
			cfg.Entrypoint = []string{SupervisorPath, supervisor.IdentityArg, id.String()}
			hc.CapAdd = append([]string(nil), supervisor.SupervisorCaps...)
		}
		cfg.OpenStdin, cfg.StdinOnce = true, false
		cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr = true, true, true
	}
	return cfg, hc, nil
}

// expandHome replaces a leading ~ with home.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}
