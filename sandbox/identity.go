package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// LabelIdentity is the sandbox identity a container runs under,
// "COMMAND_UID:SUPERVISOR_UID" (supervisor.Identity): the Engine's list
// of containers is where identities are kept, so a restarted daemon finds
// every one in use and a removed sandbox's pair is free again.
const LabelIdentity = "sandboxctl.identity"

// identities hands out sandbox identities from sandbox.identity.uidRange
// (slot k: command uid First+2k, supervisor uid First+2k+1) on one Engine.
// Identities are in force when the daemon runs as root and
// sandbox.docker.user is empty.
type identities struct {
	r sandboxconfig.UIDRange
	// reserved holds the command uids handed out for containers being
	// created (not in the Engine's list yet).
	mu       sync.Mutex
	reserved map[uint32]bool
}

// hostIDFiles are the host's account databases a range must not meet.
type hostIDFiles struct {
	Passwd, Group, Subuid, Subgid string
}

var systemIDFiles = hostIDFiles{Passwd: "/etc/passwd", Group: "/etc/group", Subuid: "/etc/subuid", Subgid: "/etc/subgid"}

// checkHostIDs refuses a range that any host account, group or
// subordinate id range uses (a missing file holds none).
func checkHostIDs(r sandboxconfig.UIDRange, files hostIDFiles) error {
	type db struct {
		path string
		sub  bool // name:first:count
	}
	for _, f := range []db{{files.Passwd, false}, {files.Group, false}, {files.Subuid, true}, {files.Subgid, true}} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox identities: read %s: %w", f.path, err)
		}
		sc := bufio.NewScanner(fh)
		line := 0
		for sc.Scan() {
			line++
			fields := strings.Split(sc.Text(), ":")
			var first, count uint64 = 0, 1
			switch {
			case f.sub && len(fields) >= 3:
				first, err = strconv.ParseUint(fields[1], 10, 32)
				if err == nil {
					count, err = strconv.ParseUint(fields[2], 10, 32)
				}
			case !f.sub && len(fields) >= 3:
				first, err = strconv.ParseUint(fields[2], 10, 32)
			default:
				continue
			}
			if err != nil {
				continue
			}
			if r.Overlaps(first, count) {
				_ = fh.Close()
				return &sandboxconfig.ConfigError{Field: "sandbox.identity.uidRange", Value: r.String(),
					Msg: fmt.Sprintf("overlaps ids the host uses (%s line %d: %q); choose a range no host account, group or subordinate range uses", f.path, line, sc.Text())}
			}
		}
		err = sc.Err()
		_ = fh.Close()
		if err != nil {
			return fmt.Errorf("sandbox identities: read %s: %w", f.path, err)
		}
	}
	return nil
}

// newIdentities returns the identities of cfg, or nil when they are not
// in force (a configured sandbox.docker.user, or a daemon that is not
// root and so cannot hand workspaces to other uids).
func newIdentities(cfg Config, euid int, files hostIDFiles) (*identities, error) {
	if cfg.Docker.User != "" || euid != 0 {
		return nil, nil
	}
	r, err := sandboxconfig.ParseUIDRange(cfg.Identity.UIDRange)
	if err != nil {
		return nil, err
	}
	if err := checkHostIDs(r, files); err != nil {
		return nil, err
	}
	return &identities{r: r, reserved: map[uint32]bool{}}, nil
}

// slotOf returns the identity of command uid c when c is the command uid
// of a slot of the range.
func (ids *identities) slotOf(c uint32) (supervisor.Identity, bool) {
	if !ids.r.Contains(c) || (c-ids.r.First)%2 != 0 || c-ids.r.First >= 2*ids.r.Slots() {
		return supervisor.Identity{}, false
	}
	return supervisor.Identity{Command: c, Supervisor: c + 1}, true
}

// allocIdentity picks the identity for a new container named name whose
// workspace is wsDir: the one that owns wsDir already when no container
// uses it (a recreated sandbox keeps its files' owner), else a free slot
// (probing from a hash of the name, so daemons sharing an Engine rarely
// race for one). release must be called once the container exists (its
// label then holds the identity) or was not made.
func (m *DockerEngine) allocIdentity(ctx context.Context, name, wsDir string) (id supervisor.Identity, release func(), err error) {
	ids := m.ident
	// Every managed container of the Engine counts, this daemon's or not.
	list, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelIdentity)})
	if err != nil {
		return id, nil, m.classify("list sandbox identities", err)
	}
	used := map[uint32]bool{}
	for _, c := range list.Items {
		if got, err := supervisor.ParseIdentity(c.Labels[LabelIdentity]); err == nil {
			used[got.Command] = true
		}
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	free := func(c uint32) bool { return !used[c] && !ids.reserved[c] }
	take := func(got supervisor.Identity) (supervisor.Identity, func(), error) {
		ids.reserved[got.Command] = true
		return got, func() {
			ids.mu.Lock()
			delete(ids.reserved, got.Command)
			ids.mu.Unlock()
		}, nil
	}
	if fi, err := os.Lstat(wsDir); err == nil && fi.IsDir() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if got, ok := ids.slotOf(st.Uid); ok && free(got.Command) {
				return take(got)
			}
		}
	}
	n := ids.r.Slots()
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	start := h.Sum32() % n
	for i := uint32(0); i < n; i++ {
		c := ids.r.First + 2*((start+i)%n)
		if free(c) {
			got, _ := ids.slotOf(c)
			return take(got)
		}
	}
	return id, nil, fmt.Errorf("sandbox identities: all %d of sandbox.identity.uidRange %s are in use: %w", n, ids.r, cerrdefs.ErrResourceExhausted)
}

// handOver makes dir (and everything under it, never following a
// symlink) owned by uid:gid, and dir itself mode 0700: a workspace of a
// sandbox identity is its command uid's alone. Files left by an earlier
// identity (or by the uid sandboxes used to share) become the new one's.
// No process of the sandbox runs while it walks: it runs before the
// container is created.
func handOver(dir string, uid, gid int) error {
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("workspace %s: not a directory (%v)", dir, err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("workspace %s: hand it to the sandbox identity %d: %w", dir, uid, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	return nil
}

// identityOf is the identity a container's labels name (ok false for a
// container made without one).
func identityOf(labels map[string]string) (supervisor.Identity, bool) {
	id, err := supervisor.ParseIdentity(labels[LabelIdentity])
	return id, err == nil
}

// agentDirFor sets the agent's own directory when it is not what is
// mounted at /workspace (workspaceAccess ro or none): mounted read-only at
// the agent path (ro), the command uid reads it through its group (root
// keeps it, mode 0750); unmounted (none), it is the daemon's alone (0700).
func (m *DockerEngine) agentDirFor(sh shape, id supervisor.Identity) error {
	dir := sh.Layout.AgentDir
	if dir == "" || dir == sh.Layout.WorkspaceHost {
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return nil // made below, or not ours to change
	}
	mode := os.FileMode(0o700)
	if sh.Layout.Access == workdir.AccessRO {
		if err := os.Lchown(dir, -1, int(id.Command)); err != nil {
			return fmt.Errorf("sandbox: agent workspace %s: %w", dir, err)
		}
		mode = 0o750
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("sandbox: agent workspace %s: %w", dir, err)
	}
	return nil
}

// execUsers caches, per container id, the user an Engine exec runs as when
// the caller names none: a supervised container of a sandbox identity runs
// as root (its supervisor drops to its own uid at once), and an exec must
// never inherit that, so it runs as the command uid.
type execUsers struct {
	mu sync.Mutex
	m  map[string]string
}

func (e *execUsers) forget(id string) {
	e.mu.Lock()
	delete(e.m, id)
	e.mu.Unlock()
}

// execUser is the user for an Engine exec into container id: "" (the
// container's user) unless the container has a sandbox identity.
func (m *DockerEngine) execUser(ctx context.Context, id string) (string, error) {
	m.execUsers.mu.Lock()
	u, ok := m.execUsers.m[id]
	m.execUsers.mu.Unlock()
	if ok {
		return u, nil
	}
	insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		if isNotFound(err) {
			return "", fmt.Errorf("sandbox exec: container %s: %w", short(id), ErrNotFound)
		}
		return "", m.classify("sandbox exec: inspect", err)
	}
	if insp.Container.Config != nil {
		if ident, ok := identityOf(insp.Container.Config.Labels); ok {
			u = fmt.Sprintf("%d:%d", ident.Command, ident.Command)
		}
	}
	m.execUsers.mu.Lock()
	if m.execUsers.m == nil {
		m.execUsers.m = map[string]string{}
	}
	m.execUsers.m[id] = u
	m.execUsers.mu.Unlock()
	return u, nil
}
