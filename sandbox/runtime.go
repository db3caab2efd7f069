package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// The gVisor runtimes as `make docker-up` registers them: RuntimeRunsc
// with no network interface at all (runsc --network=none), RuntimeRunscNet
// with gVisor's own network stack on the container's network (runsc
// --network=sandbox), which an egress allowlist sandbox needs.
const (
	RuntimeRunsc    = "runsc"
	RuntimeRunscNet = "runsc-net"
)

// gvisorRuntime reports whether rt names one of the gVisor runtimes.
func gvisorRuntime(rt string) bool { return rt == RuntimeRunsc || rt == RuntimeRunscNet }

// Under runsc the container's pids limit bounds gVisor's host tasks:
// runscBaseTasks for the sentry and gofer (38 measured idle), plus
// runscTasksPerProcess per sandbox process (~10 measured with the ptrace
// platform).
const (
	runscBaseTasks       = 128
	runscTasksPerProcess = 12
)

// engineRuntimes caches the Engine's runtime list (docker info): a name
// once found stays valid for the Manager's life; a name not found asks the
// Engine again (it may have been registered meanwhile with a SIGHUP).
type engineRuntimes struct {
	mu    sync.Mutex
	known map[string]engineRuntime
	def   string
}

// engineRuntime is what the Engine says of one runtime.
type engineRuntime struct {
	// noNetwork: the Engine runs it with runsc's --network=none (runsc
	// as `make docker-up` registers it), so its containers have no
	// network interface whatever their network says.
	noNetwork bool
}

// runtimeInfo returns the Engine's runtimes (names sorted) and its default
// one.
func (m *DockerEngine) runtimeInfo(ctx context.Context) (names []string, all map[string]engineRuntime, def string, err error) {
	info, err := m.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, nil, "", m.classify("docker info", err)
	}
	all = map[string]engineRuntime{}
	for name, rt := range info.Info.Runtimes {
		names = append(names, name)
		all[name] = engineRuntime{noNetwork: slices.Contains(rt.Args, "--network=none")}
	}
	sort.Strings(names)
	return names, all, info.Info.DefaultRuntime, nil
}

// checkRuntime makes sure the Engine has the configured runtime: an
// unknown one is an ErrInvalidConfig naming the runtimes it has. The
// Engine's default runtime ("" configured) needs no check. With
// needNetwork (an egress allowlist sandbox), a runtime the Engine runs
// with --network=none is an ErrInvalidConfig too: its sandbox would have
// no network at all (it would fail closed, but no allowed name would work).
func (m *DockerEngine) checkRuntime(ctx context.Context, needNetwork bool) error {
	want := m.cfg.Docker.Runtime
	if want == "" {
		return nil
	}
	m.runtimes.mu.Lock()
	defer m.runtimes.mu.Unlock()
	rt, ok := m.runtimes.known[want]
	if !ok {
		names, all, def, err := m.runtimeInfo(ctx)
		if err != nil {
			return err
		}
		m.runtimes.known, m.runtimes.def = all, def
		if rt, ok = all[want]; !ok {
			hint := ""
			if gvisorRuntime(want) {
				hint = " (`make docker-up` installs gVisor and registers runsc and runsc-net)"
			}
			return &sandboxconfig.ConfigError{Field: "sandbox.docker.runtime", Value: want,
				Msg: fmt.Sprintf("the Docker Engine at %s has no such runtime; it has: %s%s", m.engineHost(), strings.Join(names, ", "), hint)}
		}
	}
	if needNetwork && rt.noNetwork {
		return &sandboxconfig.ConfigError{Field: "sandbox.docker.runtime", Value: want,
			Msg: fmt.Sprintf("the Docker Engine at %s runs %s with --network=none, so an egress allowlist sandbox would have no network at all; use a runtime with a network (under gVisor: %s, which `make docker-up` registers)", m.engineHost(), want, RuntimeRunscNet)}
	}
	return nil
}

// missingRuntime returns want when an Engine listing runtimes lacks it,
// else "" (the Engine's default runtime, want "", is always there).
func missingRuntime[V any](want string, runtimes map[string]V) string {
	if _, ok := runtimes[want]; want == "" || ok {
		return ""
	}
	return want
}

// runtimeOf names the runtime of a sandbox for `sandbox explain`: the
// configured one, else the Engine's default (asked, when it answers).
func (m *DockerEngine) runtimeOf(ctx context.Context) string {
	if r := m.cfg.Docker.Runtime; r != "" {
		return r
	}
	if _, _, def, err := m.runtimeInfo(ctx); err == nil && def != "" {
		return def + " (the Engine's default)"
	}
	return "the Engine's default"
}

// localRuntime reports whether a container of runtime rt shares this
// host's kernel view, so that its supervisor's socket is reachable through
// /proc/<pid>/root (runc). Under gVisor (runsc) the container's files live
// in the sandbox kernel: only the attach stream reaches the supervisor.
func localRuntime(rt string) bool {
	switch rt {
	case "", "runc", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux":
		return true
	case "oci": // Podman's name for its default OCI runtime (runc or crun)
		return true
	}
	return false
}

// runtimeNoteFor says what a sandbox under runtime rt does differently
// from runc ("" = nothing).
func runtimeNoteFor(rt string) string {
	switch {
	case localRuntime(rt):
		return ""
	case gvisorRuntime(rt):
		return "gVisor: the supervisor is reached over the Engine's attach stream only (its socket lives in the gVisor kernel); " +
			"gVisor has no /proc/PID/syscall nor /proc/PID/wchan, so input-wait detection is off and commands never report \"waiting for input\"; " +
			fmt.Sprintf("the Engine's pids limit counts gVisor's host tasks, so it is set to pidsLimit x %d + %d, and reaching it ends the whole sandbox", runscTasksPerProcess, runscBaseTasks)
	default:
		return "runtime " + rt + ": the supervisor is reached over the Engine's attach stream only"
	}
}
