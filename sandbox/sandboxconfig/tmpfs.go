package sandboxconfig

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/docker/go-units"

	"github.com/sandboxctl/sandboxctl/workdir"
)

// DefaultTmpfsSize is the size of a tmpfs entry that names none. A tmpfs is
// charged to the container's memory: unsized, filling it could exhaust the
// memory limit and take the supervisor with it (issue 13 item 3).
const DefaultTmpfsSize = "64m"

// Tmpfs is one parsed `PATH[:OPTIONS]` entry of sandbox.docker.tmpfs.
type Tmpfs struct {
	Path string
	Size int64 // bytes, after ParseTmpfsList's cap
	// Requested is the size the entry asked for, when ParseTmpfsList
	// capped it (0: not capped).
	Requested int64
	mode      string // octal
	exec      string // "exec", "noexec" or ""
}

// MountOptions is the mount option string given to the Engine: always
// rw,nosuid,nodev, the size and a mode (1777 unless given).
func (t Tmpfs) MountOptions() string {
	o := "rw,nosuid,nodev,size=" + strconv.FormatInt(t.Size, 10) + ",mode=" + t.mode
	if t.exec != "" {
		o += "," + t.exec
	}
	return o
}

// TmpfsReserve is the memory a tmpfs may never take from a sandbox whose
// memory limit is memory: a quarter of it, at least 32 MiB, at most half.
// A tmpfs is charged to the container's memory; one that could fill the
// whole limit would leave the supervisor, once the writer is killed, the
// only process for the OOM killer to pick (issue 13 item 3).
func TmpfsReserve(memory int64) int64 {
	return min(max(memory/4, 32<<20), memory/2)
}

// ParseTmpfs parses one tmpfs entry: PATH, or PATH:OPTIONS with OPTIONS a
// comma list of size=SIZE (e.g. 256m), mode=OCTAL, exec, noexec.
func ParseTmpfs(field, entry string) (Tmpfs, error) {
	bad := func(msg string) (Tmpfs, error) {
		return Tmpfs{}, &ConfigError{Field: field, Value: entry, Msg: msg}
	}
	p, opts, _ := strings.Cut(entry, ":")
	if !path.IsAbs(p) {
		return bad("must be an absolute container path, optionally followed by :size=SIZE[,mode=OCTAL][,exec|noexec]")
	}
	t := Tmpfs{Path: path.Clean(p)}
	// As a bind there: it would hide the workspace, and a fork or
	// rollback could not put one under it.
	for _, reserved := range []string{workdir.ContainerWorkspace, workdir.ContainerAgent} {
		if workdir.ContainsPath(reserved, t.Path) {
			return bad(fmt.Sprintf("tmpfs path %s is reserved for the workspace (%s)", t.Path, reserved))
		}
	}
	size, mode, exec := DefaultTmpfsSize, "1777", ""
	if opts != "" {
		for _, o := range strings.Split(opts, ",") {
			k, v, _ := strings.Cut(o, "=")
			switch k {
			case "size":
				size = v
			case "mode":
				if _, err := strconv.ParseUint(v, 8, 32); err != nil || len(v) > 4 {
					return bad(fmt.Sprintf("mode %q is not an octal mode", v))
				}
				mode = v
			case "exec", "noexec":
				if v != "" {
					return bad(fmt.Sprintf("option %q takes no value", o))
				}
				exec = k
			default:
				return bad(fmt.Sprintf("option %q: only size=, mode=, exec and noexec are accepted", o))
			}
		}
	}
	n, err := units.RAMInBytes(size)
	if err != nil || n <= 0 {
		return bad(fmt.Sprintf("size %q is not a size like 64m", size))
	}
	t.Size, t.mode, t.exec = n, mode, exec
	return t, nil
}

// ParseTmpfsList parses every tmpfs entry of d, refusing a path given
// twice. Under a memory limit no tmpfs is larger than the limit less
// TmpfsReserve: a larger one is capped (Requested keeps what it asked).
func ParseTmpfsList(d DockerConfig) ([]Tmpfs, error) {
	out := make([]Tmpfs, 0, len(d.Tmpfs))
	seen := map[string]bool{}
	for i, e := range d.Tmpfs {
		t, err := ParseTmpfs(fmt.Sprintf("sandbox.docker.tmpfs[%d]", i), e)
		if err != nil {
			return nil, err
		}
		if seen[t.Path] {
			return nil, &ConfigError{Field: fmt.Sprintf("sandbox.docker.tmpfs[%d]", i), Value: e, Msg: "path given twice"}
		}
		seen[t.Path] = true
		out = append(out, t)
	}
	if r, err := ParseResources(d); err == nil && r.Memory > 0 {
		limit := r.Memory - TmpfsReserve(r.Memory)
		for i := range out {
			if out[i].Size > limit {
				out[i].Requested, out[i].Size = out[i].Size, limit
			}
		}
	}
	return out, nil
}
