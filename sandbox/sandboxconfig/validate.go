package sandboxconfig

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/docker/go-units"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// runtimeName is the shape of an Engine runtime name (docker info's
// Runtimes keys); whether the Engine has it is checked when a sandbox is
// created.
var runtimeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })

// blockedBindSources are host paths that may never be bound into a sandbox,
// nor anything under them (except "/", which is blocked only as itself).
var blockedBindSources = []string{"/etc", "/proc", "/sys", "/dev", "/boot", "/root", "/run", "/var/run"}

// Bind is one parsed `src:dst[:mode]` entry of sandbox.docker.binds.
type Bind struct {
	Source   string // host path as configured
	Resolved string // Source with symlinks of existing ancestors resolved
	Target   string
	ReadOnly bool
}

// ParseBind parses and validates one bind entry (SECURITY.md, "Sandboxes"). field names the
// entry in errors. allowedRoots, when non-empty, limits the resolved source.
func ParseBind(field, spec string, allowedRoots []string) (Bind, error) {
	bad := func(msg string) (Bind, error) {
		return Bind{}, &ConfigError{Field: field, Value: spec, Msg: msg}
	}
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return bad("want SOURCE:TARGET[:ro|rw]")
	}
	b := Bind{Source: parts[0], Target: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			b.ReadOnly = true
		case "rw":
		default:
			return bad(fmt.Sprintf("mode %q is not ro or rw", parts[2]))
		}
	}
	if !filepath.IsAbs(b.Source) {
		return bad("bind source must be an absolute path")
	}
	resolved, err := resolveExisting(filepath.Clean(b.Source))
	if err != nil {
		return bad(fmt.Sprintf("cannot resolve bind source: %v", err))
	}
	b.Resolved = resolved
	if reason := blockedSource(b.Source, resolved); reason != "" {
		return bad(reason)
	}
	if len(allowedRoots) > 0 {
		ok := false
		for _, root := range allowedRoots {
			r, err := resolveExisting(filepath.Clean(root))
			if err == nil && workdir.ContainsPath(r, resolved) {
				ok = true
				break
			}
		}
		if !ok {
			return bad(fmt.Sprintf("bind source %s is outside sandbox.allowedSourceRoots", resolved))
		}
	}
	if !path.IsAbs(b.Target) {
		return bad("bind target must be an absolute container path")
	}
	target := path.Clean(b.Target)
	if target == "/" {
		return bad("bind target / would replace the container's root")
	}
	for _, reserved := range []string{workdir.ContainerWorkspace, workdir.ContainerAgent} {
		if workdir.ContainsPath(reserved, target) {
			return bad(fmt.Sprintf("bind target %s is reserved for the workspace (%s)", target, reserved))
		}
	}
	b.Target = target
	return b, nil
}

// blockedSource returns why a bind source is refused, or "".
func blockedSource(orig, resolved string) string {
	for _, p := range []string{filepath.Clean(orig), resolved} {
		if p == "/" {
			return "binding the host root / is refused"
		}
		if filepath.Base(p) == "docker.sock" || strings.Contains(p, "docker.sock") {
			return fmt.Sprintf("binding the Docker socket (%s) would give the sandbox the host", p)
		}
		for _, blocked := range blockedBindSources {
			if workdir.ContainsPath(blocked, p) {
				if p != filepath.Clean(orig) {
					return fmt.Sprintf("bind source resolves to %s, under blocked host path %s", p, blocked)
				}
				return fmt.Sprintf("bind source is under blocked host path %s", blocked)
			}
		}
	}
	return ""
}

// resolveExisting resolves symlinks in the longest existing prefix of p and
// appends the rest, so a bind to a not-yet-created path under a symlink is
// still judged by where it really lands.
func resolveExisting(p string) (string, error) {
	rest := ""
	cur := p
	for {
		if _, err := os.Lstat(cur); err == nil {
			real, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return "", err
			}
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return filepath.Join(cur, rest), nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// Validate checks a Config and returns the first refusal; nothing may be
// created from a config that fails it.
func (c Config) Validate() error {
	switch c.Scope {
	case "session", "agent", "shared":
	default:
		return &ConfigError{Field: "sandbox.scope", Value: c.Scope, Msg: "must be session, agent or shared"}
	}
	if _, err := workdir.ParseAccess(c.WorkspaceAccess); err != nil {
		return &ConfigError{Field: "sandbox.workspaceAccess", Value: c.WorkspaceAccess, Msg: "must be none, ro or rw"}
	}
	d := c.Docker
	if strings.TrimSpace(d.Image) == "" {
		return &ConfigError{Field: "sandbox.docker.image", Msg: "must not be empty"}
	}
	switch {
	case d.Network == "host":
		return &ConfigError{Field: "sandbox.docker.network", Value: d.Network, Msg: "network host shares the host's network stack and is refused"}
	case strings.HasPrefix(d.Network, "container:"):
		return &ConfigError{Field: "sandbox.docker.network", Value: d.Network, Msg: "joining another container's network namespace is refused"}
	case d.Network == "":
		return &ConfigError{Field: "sandbox.docker.network", Msg: "must not be empty (use none)"}
	}
	if err := envguard.CheckSandboxConfigEnv(d.Env); err != nil {
		field := "sandbox.docker.env"
		var re *envguard.RefusedError
		if errors.As(err, &re) {
			field += "." + re.Key
		}
		return &ConfigError{Field: field, Msg: err.Error()}
	}
	if d.Runtime != "" && !runtimeName().MatchString(d.Runtime) {
		return &ConfigError{Field: "sandbox.docker.runtime", Value: d.Runtime, Msg: "must be a runtime name the Docker Engine lists, such as runc or runsc"}
	}
	if _, err := ParseUIDRange(c.Identity.UIDRange); err != nil {
		return err
	}
	if secrets, err := ParseSecrets(c.Secrets, d.Env); err != nil {
		return err
	} else if len(secrets) > 0 {
		n, err := c.ParsedNetwork()
		if err != nil {
			return err
		}
		if err := checkSecretsAllowed(secrets, n); err != nil {
			return err
		}
	}
	if f := c.SecretsUpstreamCAFile; f != "" && !filepath.IsAbs(f) {
		return &ConfigError{Field: "sandbox.secretsUpstreamCAFile", Value: f, Msg: "must be an absolute path"}
	}
	if err := c.Kubernetes.Validate(); err != nil {
		return err
	}
	if c.Pool.Size < 0 || c.Pool.Size > MaxPoolSize {
		return &ConfigError{Field: "sandbox.pool.size", Value: fmt.Sprint(c.Pool.Size), Msg: fmt.Sprintf("must be between 0 and %d", MaxPoolSize)}
	}
	if c.Pool.Size > 0 && c.Scope == "shared" {
		return &ConfigError{Field: "sandbox.pool.size", Value: fmt.Sprint(c.Pool.Size), Msg: "a pool serves new agents or sessions; scope shared has a single sandbox"}
	}
	if c.Pool.Size > 0 && c.WorkspaceAccess == string(workdir.AccessRO) {
		return &ConfigError{Field: "sandbox.pool.size", Value: fmt.Sprint(c.Pool.Size), Msg: "workspaceAccess ro mounts the agent's own workspace when the sandbox is made, which a pooled sandbox cannot know; use rw or none, or no pool"}
	}
	if c.Snapshots.MaxCount < 0 {
		return &ConfigError{Field: "sandbox.snapshots.maxCount", Value: fmt.Sprint(c.Snapshots.MaxCount), Msg: "must be >= 0 (0: no snapshots)"}
	}
	if _, err := c.Snapshots.MaxBytesValue(); err != nil {
		return err
	}
	if c.MaxPerAgent < 0 {
		return &ConfigError{Field: "sandbox.maxPerAgent", Value: fmt.Sprint(c.MaxPerAgent), Msg: "must be >= 0 (0: the default, 4)"}
	}
	if c.Max < 0 {
		return &ConfigError{Field: "sandbox.max", Value: fmt.Sprint(c.Max), Msg: "must be >= 0 (0: derived from the machine's memory)"}
	}
	if c.Max > 0 && c.MaxPerAgent > c.Max {
		return &ConfigError{Field: "sandbox.maxPerAgent", Value: fmt.Sprint(c.MaxPerAgent), Msg: fmt.Sprintf("is over sandbox.max (%d)", c.Max)}
	}
	if _, err := c.WorkspaceQuotaBytes(); err != nil {
		return err
	}
	if c.WorkspaceQuota != "" && c.Pool.Size > 0 {
		return &ConfigError{Field: "sandbox.workspaceQuota", Value: c.WorkspaceQuota, Msg: "is not supported with sandbox.pool.size > 0 (a pooled sandbox's workspace is moved, not mounted); use one or the other"}
	}
	if c.PauseAfterMinutes < 0 {
		return &ConfigError{Field: "sandbox.pauseAfterMinutes", Value: fmt.Sprint(c.PauseAfterMinutes), Msg: "must be >= 0 (0: never pause)"}
	}
	if d.PidsLimit < 0 {
		return &ConfigError{Field: "sandbox.docker.pidsLimit", Value: fmt.Sprint(d.PidsLimit), Msg: "must be >= 0"}
	}
	if d.CPUs < 0 {
		return &ConfigError{Field: "sandbox.docker.cpus", Value: fmt.Sprint(d.CPUs), Msg: "must be >= 0"}
	}
	if _, err := ParseTmpfsList(d); err != nil {
		return err
	}
	for i, b := range d.Binds {
		if _, err := ParseBind(fmt.Sprintf("sandbox.docker.binds[%d]", i), b, c.AllowedSourceRoots); err != nil {
			return err
		}
	}
	if _, err := ParseResources(d); err != nil {
		return err
	}
	if _, err := ParseEngines(c.Engines); err != nil {
		return err
	}
	if err := c.checkUnsafe(); err != nil {
		return err
	}
	if err := c.checkNetwork(); err != nil {
		return err
	}
	return c.validateTemplates()
}

// Resources is the parsed form of the resource settings.
type Resources struct {
	Memory, MemorySwap int64
	NanoCPUs           int64
	Ulimits            []*units.Ulimit
	DNS                []netip.Addr
}

// ParseResources parses memory, swap, CPUs, ulimits, DNS and extra hosts.
func ParseResources(d DockerConfig) (Resources, error) {
	var r Resources
	var err error
	if d.Memory != "" {
		if r.Memory, err = units.RAMInBytes(d.Memory); err != nil {
			return r, &ConfigError{Field: "sandbox.docker.memory", Value: d.Memory, Msg: "not a size like 512m or 2g"}
		}
	}
	if d.MemorySwap != "" {
		if d.MemorySwap == "-1" {
			r.MemorySwap = -1
		} else if r.MemorySwap, err = units.RAMInBytes(d.MemorySwap); err != nil {
			return r, &ConfigError{Field: "sandbox.docker.MemorySwap", Value: d.MemorySwap, Msg: "not a size like 1g (or -1)"}
		}
	}
	r.NanoCPUs = int64(d.CPUs * 1e9)
	names := make([]string, 0, len(d.Ulimits))
	for name := range d.Ulimits {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		u, err := units.ParseUlimit(name + "=" + d.Ulimits[name])
		if err != nil {
			return r, &ConfigError{Field: "sandbox.docker.Ulimits." + name, Value: d.Ulimits[name], Msg: err.Error()}
		}
		r.Ulimits = append(r.Ulimits, u)
	}
	for _, s := range d.DNS {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return r, &ConfigError{Field: "sandbox.docker.DNS", Value: s, Msg: "not an IP address"}
		}
		r.DNS = append(r.DNS, a)
	}
	for _, h := range d.ExtraHosts {
		if !strings.Contains(h, ":") {
			return r, &ConfigError{Field: "sandbox.docker.extraHosts", Value: h, Msg: "want host:ip"}
		}
	}
	return r, nil
}
