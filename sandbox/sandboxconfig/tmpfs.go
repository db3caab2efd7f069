package sandboxconfig

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/docker/go-units"
)

// DefaultTmpfsSize is the size of a tmpfs entry that names none. A tmpfs is
// charged to the container's memory: unsized, filling it could exhaust the
// memory limit and take the supervisor with it (issue 13 item 3).
const DefaultTmpfsSize = "64m"

// Tmpfs is one parsed `PATH[:OPTIONS]` entry of sandbox.docker.tmpfs.
type Tmpfs struct {
	Path string
	Size int64 // bytes
	// Options is the mount option string given to the Engine: always
	// rw,nosuid,nodev, a size and a mode (1777 unless given).
	Options string
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
	t.Size = n
	t.Options = "rw,nosuid,nodev,size=" + strconv.FormatInt(n, 10) + ",mode=" + mode
	if exec != "" {
		t.Options += "," + exec
	}
	return t, nil
}

// ParseTmpfsList parses every tmpfs entry of d, refusing a path given twice.
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
	return out, nil
}
