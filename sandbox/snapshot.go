package sandbox

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// Snapshots of a sandbox's files (docs/snapshots.md): its workspace and
// the contents of its tmpfs mounts, copied while the container is frozen
// (the Engine's pause), stored under <state>/snapshots/<scope>/<name>/.
// Rollback and Fork make a new container from the snapshot's template and
// put the files back.

// Snapshot copy methods (SnapshotInfo.Method, Explanation.SnapshotMethod).
const (
	// SnapshotReflink: files share their blocks with the source until
	// either is written (FICLONE); the state directory's filesystem
	// supports it (btrfs, XFS with reflink, bcachefs, ...).
	SnapshotReflink = "reflink"
	// SnapshotCopy: every byte is copied.
	SnapshotCopy = "copy"
	// SnapshotSubvolume: the snapshot's workspace is a read-only btrfs
	// subvolume (a snapshot of the workspace's subvolume, made at once,
	// or its files cloned into one), and a fork's or rollback's
	// workspace is a writable snapshot of it, made at once whatever the
	// number of files.
	SnapshotSubvolume = "subvolume"
)

// SnapshotInfo describes one snapshot: api.Snapshot, the one definition
// of its fields (snapshot.json holds its JSON). Config is the DockerConfig
// the sandbox ran under, encoded.
type SnapshotInfo struct {
	api.Snapshot
}

var snapshotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CheckSnapshotName checks a snapshot's name: 1-63 letters, digits, '.',
// '_' and '-', starting with a letter or digit.
func CheckSnapshotName(name string) error {
	if !snapshotName.MatchString(name) {
		return fmt.Errorf("%w: snapshot name %q: want 1-63 letters, digits, '.', '_' and '-', starting with a letter or digit", errBadInput, name)
	}
	return nil
}

// ErrSnapshotsFull classes a snapshot refused by sandbox.snapshots limits.
var ErrSnapshotsFull = fmt.Errorf("%w: snapshot limit", cerrdefs.ErrResourceExhausted)

const snapshotMeta = "snapshot.json"

func (m *DockerEngine) snapshotsRoot() string { return filepath.Join(m.stateDir, "snapshots") }

func (m *DockerEngine) snapshotScopeDir(scopeKey string) string {
	return filepath.Join(m.snapshotsRoot(), ContainerName("", scopeKey))
}

// SnapshotMethod is the method a snapshot of the workspace would use now:
// SnapshotSubvolume when the state directory and the workspace root are
// on one btrfs, SnapshotReflink when the state directory's filesystem
// clones files from the workspace root's, else SnapshotCopy.
func (m *DockerEngine) SnapshotMethod() string {
	if reflinkWorks(m.wsRoot, m.snapshotsRoot()) {
		if onBtrfs(existingDir(m.snapshotsRoot())) {
			return SnapshotSubvolume
		}
		return SnapshotReflink
	}
	return SnapshotCopy
}

// snapshotsExplained is Explanation.Snapshots: the copy method of
// snapshots, rollbacks and forks, and where a fork's container comes from.
func (m *DockerEngine) snapshotsExplained() string {
	method := fmt.Sprintf("%s: the filesystem of %s does not clone files from %s (no reflinks): every byte is copied, into a snapshot and back into a rollback's or fork's workspace", SnapshotCopy, m.snapshotsRoot(), m.wsRoot)
	fill := "clones the files into its workspace"
	switch m.SnapshotMethod() {
	case SnapshotSubvolume:
		method = fmt.Sprintf("%s: %s and %s are on one btrfs: a workspace is a subvolume, a snapshot keeps a read-only snapshot of it in %s, and a rollback's or fork's workspace is a writable snapshot of that, each made at once whatever the number of files; blocks are shared until written", SnapshotSubvolume, m.snapshotsRoot(), m.wsRoot, m.snapshotsRoot())
		fill = "puts the snapshot's subvolume in its workspace (mounted into its running container) and hands the files to its identity"
	case SnapshotReflink:
		method = fmt.Sprintf("%s: the workspace is cloned (FICLONE, file by file) into %s and back into a rollback's or fork's workspace; blocks are shared until written", SnapshotReflink, m.snapshotsRoot())
	}
	fork := "a fork makes its container, then " + fill
	if n := m.poolSize(sandboxconfig.DefaultTemplate); n > 0 {
		fork = fmt.Sprintf("a fork takes a sandbox of the warm pool (sandbox.pool.size %d) when one is ready, else makes its container, then %s", n, fill)
	}
	return method + "; " + fork
}

// reflinkWorks probes FICLONE from a file under srcDir to one under dstDir.
func reflinkWorks(srcDir, dstDir string) bool {
	srcDir, dstDir = existingDir(srcDir), existingDir(dstDir)
	src, err := os.CreateTemp(srcDir, ".reflink-probe-*")
	if err != nil {
		return false
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.WriteString("probe"); err != nil {
		return false
	}
	dst, err := os.CreateTemp(dstDir, ".reflink-probe-*")
	if err != nil {
		return false
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil
}

// existingDir is p or its nearest existing parent (a probe creates no
// directory).
func existingDir(p string) string {
	for {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

// sandboxOf returns the sandbox serving scope s.
func (m *DockerEngine) sandboxOf(ctx context.Context, s Scope) (Info, error) {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	in, err := m.Get(ctx, ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey))
	if errors.Is(err, ErrNotFound) {
		return in, fmt.Errorf("%w: scope %s has no sandbox", ErrNotFound, scopeKey)
	}
	return in, err
}

// snapshotCheck refuses what snapshots do not support, before anything
// changes.
func (m *DockerEngine) snapshotCheck(in Info) (DockerConfig, error) {
	if in.Pool == PoolReady {
		return DockerConfig{}, fmt.Errorf("%w: sandbox %s is a warm-pool sandbox: it has no agent files", errBadInput, in.Name)
	}
	if q, _ := m.cfg.WorkspaceQuotaBytes(); q > 0 {
		return DockerConfig{}, fmt.Errorf("%w: snapshots are not supported with sandbox.workspaceQuota (a mounted volume) yet", errBadInput)
	}
	if !m.localSupervisor {
		return DockerConfig{}, fmt.Errorf("%w: snapshots need the Docker Engine on this host (its unix socket): the tmpfs contents are read through /proc", errBadInput)
	}
	d, err := m.cfg.TemplateDocker(in.Template)
	if err != nil {
		return d, fmt.Errorf("%w: sandbox %s: %w", errBadInput, in.Name, err)
	}
	if !d.ReadOnlyRoot {
		return d, fmt.Errorf("%w: sandbox %s has a writable root filesystem (sandbox.docker.readOnlyRoot: false): snapshots of rootfs changes are not supported yet", errBadInput, in.Name)
	}
	return d, nil
}

// Snapshot copies the files of scope s's sandbox into the snapshot name
// ("": snap-<time>). The container is frozen (the Engine's pause) for the
// copy, so no file is caught half-written, and thawed after unless it was
// paused already; running commands carry on where they were.
func (m *DockerEngine) Snapshot(ctx context.Context, s Scope, name string) (SnapshotInfo, error) {
	release, err := m.staging()
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer release()
	if name == "" {
		name = "snap-" + m.now().UTC().Format("20060102-150405.000")
	}
	if err := CheckSnapshotName(name); err != nil {
		return SnapshotInfo{}, err
	}
	if m.cfg.Snapshots.MaxCount == 0 {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshots are off (sandbox.snapshots.maxCount: 0)", ErrSnapshotsFull)
	}
	maxBytes, err := m.cfg.Snapshots.MaxBytesValue()
	if err != nil {
		return SnapshotInfo{}, err
	}
	in, err := m.sandboxOf(ctx, s)
	if err != nil {
		return SnapshotInfo{}, err
	}
	d, err := m.snapshotCheck(in)
	if err != nil {
		return SnapshotInfo{}, err
	}
	lock := m.scopeLock(in.ScopeKey)
	lock.Lock()
	defer lock.Unlock()
	m.snapMu.Lock()
	defer m.snapMu.Unlock()

	dir := m.snapshotScopeDir(in.ScopeKey)
	final := filepath.Join(dir, name)
	if _, err := os.Lstat(final); err == nil {
		return SnapshotInfo{}, fmt.Errorf("%w: scope %s has a snapshot %q already", cerrdefs.ErrConflict, in.ScopeKey, name)
	}
	have, err := m.snapshotList(in.ScopeKey)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if len(have) >= m.cfg.Snapshots.MaxCount {
		return SnapshotInfo{}, fmt.Errorf("%w: scope %s has %d snapshots, sandbox.snapshots.maxCount is %d: remove or prune some first (sandboxctl sandbox snapshots)", ErrSnapshotsFull, in.ScopeKey, len(have), m.cfg.Snapshots.MaxCount)
	}
	used, err := m.snapshotBytes()
	if err != nil {
		return SnapshotInfo{}, err
	}
	tmpfsList, err := sandboxconfig.ParseTmpfsList(d)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("sandbox %s: %w", in.Name, err)
	}

	insp, err := m.cli.ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
	if err != nil {
		return SnapshotInfo{}, m.classify("inspect sandbox "+in.Name, err)
	}
	st := insp.Container.State
	if st == nil || (st.Status != container.StateRunning && st.Status != container.StatePaused) || st.Pid <= 0 {
		return SnapshotInfo{}, fmt.Errorf("%w: sandbox %s is not running", cerrdefs.ErrConflict, in.Name)
	}
	if hc := insp.Container.HostConfig; hc != nil && !localRuntime(hc.Runtime) {
		return SnapshotInfo{}, fmt.Errorf("%w: sandbox %s runs under %s, whose tmpfs contents this host cannot read: snapshots need runc", errBadInput, in.Name, hc.Runtime)
	}

	tmp, err := m.snapshotTemp()
	if err != nil {
		return SnapshotInfo{}, err
	}
	done := false
	defer func() {
		if !done {
			_ = removeTree(tmp)
		}
	}()

	if st.Status == container.StateRunning {
		if _, err := m.cli.ContainerPause(ctx, in.ID, client.ContainerPauseOptions{}); err != nil {
			return SnapshotInfo{}, m.classify("freeze sandbox "+in.Name+" for a snapshot", err)
		}
		thawed := false
		thaw := func() error {
			if thawed {
				return nil
			}
			thawed = true
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if _, err := m.cli.ContainerUnpause(uctx, in.ID, client.ContainerUnpauseOptions{}); err != nil {
				return m.classify("thaw sandbox "+in.Name+" after a snapshot", err)
			}
			return nil
		}
		defer func() { _ = thaw() }()
		defer m.reg.touch(in.Name, in.ScopeKey)
		info, err := m.snapshotCopy(in, d, st.Pid, tmpfsList, tmp, maxBytes-used)
		if err != nil {
			return SnapshotInfo{}, err
		}
		if err := thaw(); err != nil {
			return SnapshotInfo{}, err
		}
		return m.snapshotCommit(info, tmp, final, name, &done)
	}
	info, err := m.snapshotCopy(in, d, st.Pid, tmpfsList, tmp, maxBytes-used)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return m.snapshotCommit(info, tmp, final, name, &done)
}

func (m *DockerEngine) snapshotTemp() (string, error) {
	if err := os.MkdirAll(m.snapshotsRoot(), 0o700); err != nil {
		return "", fmt.Errorf("snapshots: %w", err)
	}
	tmp, err := os.MkdirTemp(m.snapshotsRoot(), ".tmp-")
	if err != nil {
		return "", fmt.Errorf("snapshots: %w", err)
	}
	return tmp, nil
}

// snapshotCopy copies the workspace and the tmpfs contents of the frozen
// container (pid: its pid 1 on this host) into tmp, at most budget bytes.
func (m *DockerEngine) snapshotCopy(in Info, d DockerConfig, pid int, tmpfsList []sandboxconfig.Tmpfs, tmp string, budget int64) (SnapshotInfo, error) {
	config, err := json.Marshal(d)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot of sandbox %s: config: %w", in.Name, err)
	}
	info := SnapshotInfo{api.Snapshot{
		ScopeKey: in.ScopeKey, AgentID: in.AgentID, SessionKey: in.SessionKey,
		CreatedAt: m.now().UTC(), Origin: in.Name, OriginID: in.ID,
		Template: in.Template, Labels: in.Labels, Config: config, Tmpfs: []string{},
	}}
	c := &treeCopier{budget: budget, reflink: true}
	ws := m.layoutFor(in.ScopeKey, in.Name).WorkspaceHost
	method, err := snapshotWorkspace(c, ws, filepath.Join(tmp, "workspace"))
	if err != nil {
		return info, fmt.Errorf("snapshot of sandbox %s: workspace: %w", in.Name, err)
	}
	info.Method = method
	root := fmt.Sprintf("/proc/%d/root", pid)
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return info, fmt.Errorf("snapshot of sandbox %s: open its root: %w", in.Name, err)
	}
	defer unix.Close(rootFD)
	// The root opened is the container's only if pid is in its cgroup (a
	// daemon in another pid namespace, or a pid reused, would see another
	// process's).
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || !strings.Contains(string(cg), in.ID) {
		return info, fmt.Errorf("%w: snapshot of sandbox %s: pid %d on this host is not its container's (the daemon must share the Engine's pid namespace)", errBadInput, in.Name, pid)
	}
	c.reflink = false // tmpfs: nothing to share
	for _, t := range tmpfsList {
		rel := strings.TrimPrefix(t.Path, "/")
		fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS,
		})
		if err != nil {
			return info, fmt.Errorf("snapshot of sandbox %s: tmpfs %s: %w", in.Name, t.Path, err)
		}
		skip := map[string]bool{}
		for _, sd := range supervisor.StateDirs() {
			if r, ok := strings.CutPrefix(sd, strings.TrimSuffix(t.Path, "/")+"/"); ok {
				skip[r] = true // the supervisor's own state: never a sandbox's
			}
		}
		err = c.copyDir(fmt.Sprintf("/proc/self/fd/%d", fd), filepath.Join(tmp, "tmpfs", rel), skip)
		_ = unix.Close(fd)
		if err != nil {
			return info, fmt.Errorf("snapshot of sandbox %s: tmpfs %s: %w", in.Name, t.Path, err)
		}
		info.Tmpfs = append(info.Tmpfs, t.Path)
	}
	info.Bytes, info.Files, info.Skipped = c.bytes, c.files, c.skipped
	return info, nil
}

func (m *DockerEngine) snapshotCommit(info SnapshotInfo, tmp, final, name string, done *bool) (SnapshotInfo, error) {
	info.Name = name
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return info, err
	}
	if err := atomicfile.Write(filepath.Join(tmp, snapshotMeta), data, 0o600); err != nil {
		return info, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return info, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return info, fmt.Errorf("snapshot %s: %w", name, err)
	}
	*done = true
	m.logf("sandbox %s: snapshot %s taken (%s, %d files, %s)", info.Origin, name, units.BytesSize(float64(info.Bytes)), info.Files, info.Method)
	return info, nil
}

// snapshotList returns the snapshots of scopeKey, oldest first.
func (m *DockerEngine) snapshotList(scopeKey string) ([]SnapshotInfo, error) {
	dir := m.snapshotScopeDir(scopeKey)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	var out []SnapshotInfo
	for _, e := range ents {
		if !e.IsDir() || CheckSnapshotName(e.Name()) != nil {
			continue
		}
		if info, err := readSnapshot(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func readSnapshot(dir string) (SnapshotInfo, error) {
	var info SnapshotInfo
	data, err := os.ReadFile(filepath.Join(dir, snapshotMeta))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(data, &info)
}

// snapshotBytes is what all snapshots of the state directory hold.
func (m *DockerEngine) snapshotBytes() (int64, error) {
	metas, _ := filepath.Glob(filepath.Join(m.snapshotsRoot(), "*", "*", snapshotMeta))
	var n int64
	for _, f := range metas {
		if info, err := readSnapshot(filepath.Dir(f)); err == nil {
			n += info.Bytes
		}
	}
	return n, nil
}

// Snapshots lists the snapshots of scope s (its sandbox may be gone),
// oldest first.
func (m *DockerEngine) Snapshots(s Scope) ([]SnapshotInfo, error) {
	return m.snapshotList(ScopeKey(m.cfg.Scope, s))
}

// SnapshotOf returns scope s's snapshot name.
func (m *DockerEngine) SnapshotOf(s Scope, name string) (SnapshotInfo, error) {
	if err := CheckSnapshotName(name); err != nil {
		return SnapshotInfo{}, err
	}
	scopeKey := ScopeKey(m.cfg.Scope, s)
	info, err := readSnapshot(filepath.Join(m.snapshotScopeDir(scopeKey), name))
	if errors.Is(err, os.ErrNotExist) {
		return info, fmt.Errorf("%w: scope %s has no snapshot %q", ErrNotFound, scopeKey, name)
	}
	if err != nil {
		return info, fmt.Errorf("snapshot %s: %w", name, err)
	}
	return info, nil
}

// RemoveSnapshot removes scope s's snapshot name.
func (m *DockerEngine) RemoveSnapshot(s Scope, name string) (SnapshotInfo, error) {
	release, err := m.staging()
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer release()
	info, err := m.SnapshotOf(s, name)
	if err != nil {
		return info, err
	}
	dir := filepath.Join(m.snapshotScopeDir(info.ScopeKey), name)
	// Rename first: a listing never sees half a snapshot.
	gone := filepath.Join(m.snapshotsRoot(), ".rm-"+randomHex(6))
	if err := os.Rename(dir, gone); err != nil {
		return info, fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	if err := removeTree(gone); err != nil {
		return info, fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	return info, nil
}

// PruneSnapshots removes scope s's snapshots older than olderThan (0: no
// age rule) and all but the newest keep (negative: no count rule), and
// returns them.
func (m *DockerEngine) PruneSnapshots(s Scope, olderThan time.Duration, keep int) ([]SnapshotInfo, error) {
	list, err := m.Snapshots(s)
	if err != nil {
		return nil, err
	}
	var gone []SnapshotInfo
	for i, info := range list {
		old := olderThan > 0 && m.now().Sub(info.CreatedAt) > olderThan
		over := keep >= 0 && i < len(list)-keep
		if !old && !over {
			continue
		}
		if _, err := m.RemoveSnapshot(s, info.Name); err != nil {
			return gone, err
		}
		gone = append(gone, info)
	}
	return gone, nil
}

// Rollback puts scope s's sandbox back to its snapshot name: the
// container is removed (its running commands end), the workspace is
// replaced by the snapshot's, and a new container is made from the
// snapshot's template, with the sandbox's labels and expiry, its tmpfs
// contents restored.
func (m *DockerEngine) Rollback(ctx context.Context, s Scope, name string) (Info, error) {
	release, err := m.staging()
	if err != nil {
		return Info{}, err
	}
	defer release()
	snap, err := m.SnapshotOf(s, name)
	if err != nil {
		return Info{}, err
	}
	in, err := m.sandboxOf(ctx, s)
	if err != nil {
		return Info{}, err
	}
	if _, err := m.snapshotCheck(in); err != nil {
		return Info{}, err
	}
	if err := m.restoreCheck(snap); err != nil {
		return Info{}, err
	}
	o := CreateOptions{Template: snap.Template, Labels: in.Labels}
	if !in.ExpiresAt.IsZero() {
		if o.TTL = in.ExpiresAt.Sub(m.now()); o.TTL <= 0 {
			o.TTL = time.Second
		}
	}
	lock := m.scopeLock(in.ScopeKey)
	lock.Lock()
	defer lock.Unlock()
	snapDir := filepath.Join(m.snapshotScopeDir(snap.ScopeKey), name)
	ws := m.layoutFor(in.ScopeKey, in.Name).WorkspaceHost
	staged, err := stageWorkspace(snapDir, ws)
	if err != nil {
		return Info{}, fmt.Errorf("rollback of sandbox %s to %s: %w", in.Name, name, err)
	}
	if err := m.RemoveByName(ctx, in.ID); err != nil {
		_ = removeTree(staged)
		return Info{}, err
	}
	m.forgetObject(in.Name)
	old, err := swapWorkspace(staged, ws)
	if err != nil {
		return Info{}, fmt.Errorf("rollback of sandbox %s to %s: its container is removed; %w", in.Name, name, err)
	}
	out, err := m.createLocked(ctx, s, o)
	if old != "" {
		// After the new container: a leftover fails nothing (NewManager
		// sweeps it).
		if err := removeTree(old); err != nil {
			m.logf("sandbox %s: rolled back; its old workspace %s is left: %v", in.Name, old, err)
		}
	}
	if err != nil {
		return out, fmt.Errorf("rollback of sandbox %s to %s: the workspace is restored; make the container: %w", in.Name, name, err)
	}
	if err := m.restoreFreshTmpfs(ctx, out, snapDir, snap); err != nil {
		return out, fmt.Errorf("rollback of sandbox %s to %s: %w", in.Name, name, err)
	}
	m.logf("sandbox %s: rolled back to snapshot %s", in.Name, name)
	return out, nil
}

// Fork makes a sandbox for scope to from scope from's snapshot name, or
// ("" name) from a snapshot of from's live sandbox taken for the fork and
// removed after. The fork has its own copy of every file: nothing
// writable is shared with the origin.
func (m *DockerEngine) Fork(ctx context.Context, from Scope, name string, to Scope) (Info, error) {
	release, err := m.staging()
	if err != nil {
		return Info{}, err
	}
	defer release()
	fromKey, toKey := ScopeKey(m.cfg.Scope, from), ScopeKey(m.cfg.Scope, to)
	if fromKey == toKey {
		return Info{}, fmt.Errorf("%w: a fork needs another scope than its origin's (%s)", errBadInput, fromKey)
	}
	if name != "" {
		if _, err := m.SnapshotOf(from, name); err != nil {
			return Info{}, err
		}
	}
	toName := ContainerName(m.cfg.Docker.ContainerPrefix, toKey)
	ws := m.layoutFor(toKey, toName).WorkspaceHost
	if err := m.forkTargetFree(ctx, toKey, toName, ws); err != nil {
		return Info{}, err
	}
	if name == "" {
		snap, err := m.Snapshot(ctx, from, "fork-"+randomHex(6))
		if err != nil {
			return Info{}, err
		}
		name = snap.Name
		defer func() { _, _ = m.RemoveSnapshot(from, name) }()
	}
	snap, err := m.SnapshotOf(from, name)
	if err != nil {
		return Info{}, err
	}
	if err := m.restoreCheck(snap); err != nil {
		return Info{}, err
	}
	lock := m.scopeLock(toKey)
	lock.Lock()
	defer lock.Unlock()
	// Again under the lock: no command made the target's sandbox meanwhile.
	if err := m.forkTargetFree(ctx, toKey, toName, ws); err != nil {
		return Info{}, err
	}
	// The container first, its workspace empty: a warm pool's sandbox
	// serves when one is ready (takePooled takes only an empty
	// workspace). Then the workspace: a writable snapshot of the
	// snapshot's subvolume, mounted in place of the empty one, or the
	// files cloned into the directory its container mounts, owned by
	// its identity from the start (no walk to hand them over). No
	// command runs in it meanwhile: the scope is locked.
	snapDir := filepath.Join(m.snapshotScopeDir(snap.ScopeKey), name)
	t0 := time.Now()
	out, err := m.createLocked(ctx, to, CreateOptions{Template: snap.Template, Labels: snap.Labels})
	tContainer := time.Since(t0)
	if err != nil {
		if !isConflict(err) {
			_ = os.Remove(ws) // made empty, if at all (a conflict: another's)
		}
		return out, fmt.Errorf("fork of %s: %w", name, err)
	}
	undo := func() {
		_ = m.RemoveByName(context.WithoutCancel(ctx), out.ID)
		_ = removeTree(ws)
	}
	// The workspace and the tmpfs contents at once: neither reads what
	// the other writes.
	tmpfsErr := make(chan error, 1)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tTmpfs time.Duration
	go func() {
		t := time.Now()
		err := m.restoreFreshTmpfs(tctx, out, snapDir, snap)
		tTmpfs = time.Since(t)
		tmpfsErr <- err
	}()
	t1 := time.Now()
	wsErr := m.forkWorkspace(ctx, out, snapDir, ws)
	tWorkspace := time.Since(t1)
	if wsErr != nil {
		cancel()
	}
	err = <-tmpfsErr // its cancellation when the workspace failed
	if wsErr != nil {
		err = wsErr
	}
	if err != nil {
		undo()
		return Info{}, fmt.Errorf("fork of %s: %w", name, err)
	}
	m.logf("sandbox %s: forked from %s's snapshot %s in %s (container %s, pool %t; workspace %s; tmpfs %s at once)", out.Name, snap.Origin, name,
		time.Since(t0).Round(time.Millisecond), tContainer.Round(time.Millisecond), out.Pool == PoolTaken, tWorkspace.Round(time.Millisecond), tTmpfs.Round(time.Millisecond))
	return out, nil
}

// forkTargetFree refuses a fork onto scope toKey when it has a sandbox
// or a workspace with files.
func (m *DockerEngine) forkTargetFree(ctx context.Context, toKey, toName, ws string) error {
	if _, err := m.cli.ContainerInspect(ctx, toName, client.ContainerInspectOptions{}); err == nil {
		return fmt.Errorf("%w: scope %s has a sandbox already (%s): remove it first (sandboxctl sandbox rm %s)", cerrdefs.ErrConflict, toKey, toName, toName)
	} else if !isNotFound(err) {
		return m.classify("inspect sandbox "+toName, err)
	}
	if ents, err := os.ReadDir(ws); err == nil && len(ents) > 0 {
		return fmt.Errorf("%w: scope %s has a workspace with files already (%s): a fork starts from the snapshot's; remove it first (sandboxctl sandbox rm --workspace)", cerrdefs.ErrConflict, toKey, ws)
	}
	return nil
}

// forkWorkspace gives sandbox in the snapshot's workspace, owned by its
// sandbox identity when it has one: a snapshot of the snapshot's
// subvolume in place of ws, the empty workspace in mounts
// (forkSubvolume), else a copy into ws (reflinks when the filesystem
// allows).
func (m *DockerEngine) forkWorkspace(ctx context.Context, in Info, snapDir, ws string) error {
	c := &treeCopier{budget: -1, reflink: true}
	if m.ident != nil {
		ci, err := m.cli.ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
		if err != nil {
			return m.classify("inspect sandbox "+in.Name, err)
		}
		if id, ok := identityOf(ci.Container.Config.Labels); ok {
			c.owner = &fileOwner{uid: int(id.Command), gid: int(id.Command)}
		}
	}
	if !emptyOrMissing(ws) {
		return fmt.Errorf("%w: the new sandbox's workspace %s is not empty", cerrdefs.ErrConflict, ws)
	}
	if done, err := m.forkSubvolume(ctx, in, snapDir, ws, c.owner); done || err != nil {
		return err
	}
	if c.owner != nil && os.Geteuid() == 0 {
		// The daemon's alone while it fills it (no process of the sandbox
		// can rename what it makes there and put a symlink in its place),
		// handed to the identity at the end (copyDir's last step).
		if err := os.Lchown(ws, 0, 0); err != nil {
			return fmt.Errorf("workspace %s: %w", ws, err)
		}
	}
	if err := c.copyDir(filepath.Join(snapDir, "workspace"), ws, nil); err != nil {
		return fmt.Errorf("copy the workspace: %w", err)
	}
	if c.owner != nil {
		// As handOver leaves it: the command uid's alone.
		if err := os.Chmod(ws, 0o700); err != nil {
			return fmt.Errorf("workspace %s: %w", ws, err)
		}
	}
	return nil
}

// restoreCheck refuses a restore this Manager cannot finish, before it
// changes anything.
func (m *DockerEngine) restoreCheck(snap SnapshotInfo) error {
	if _, err := m.cfg.TemplateDocker(snap.Template); err != nil {
		return fmt.Errorf("%w: snapshot %s was taken under template %q: %w", errBadInput, snap.Name, snap.Template, err)
	}
	if len(snap.Tmpfs) > 0 && m.sup == nil {
		return fmt.Errorf("%w: snapshot %s holds tmpfs contents, which are restored through the sandbox's supervisor; this daemon runs sandboxes without one", errBadInput, snap.Name)
	}
	return nil
}

// stageWorkspace copies the snapshot's workspace beside ws (reflinks when
// the filesystem allows) and returns the copy.
func stageWorkspace(snapDir, ws string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(ws), 0o755); err != nil {
		return "", err
	}
	staged := filepath.Join(filepath.Dir(ws), "."+filepath.Base(ws)+".restore-"+randomHex(6))
	if src := filepath.Join(snapDir, "workspace"); isSubvolume(src) && snapshotSubvolume(src, staged, false) == nil {
		return staged, nil
	}
	c := &treeCopier{budget: -1, reflink: true}
	if err := c.copyDir(filepath.Join(snapDir, "workspace"), staged, nil); err != nil {
		_ = removeTree(staged)
		return "", fmt.Errorf("copy the workspace: %w", err)
	}
	return staged, nil
}

// swapWorkspace puts staged in ws's place and returns the old ws, set
// aside beside it ("" when there was none), for the caller to remove
// (removeTree) once it is done: a failure to remove it (a leftover) then
// fails nothing.
func swapWorkspace(staged, ws string) (string, error) {
	old := filepath.Join(filepath.Dir(ws), "."+filepath.Base(ws)+".old-"+randomHex(6))
	if err := os.Rename(ws, old); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			_ = removeTree(staged)
			return "", fmt.Errorf("set the old workspace aside: %w", err)
		}
		old = ""
	}
	if err := os.Rename(staged, ws); err != nil {
		if old != "" {
			_ = os.Rename(old, ws)
		}
		_ = removeTree(staged)
		return "", fmt.Errorf("put the workspace in place: %w", err)
	}
	return old, nil
}

// restoreTmpfs writes the snapshot's tmpfs contents into sandbox in
// through its supervisor's file tool (as the sandbox's user).
func (m *DockerEngine) restoreTmpfs(ctx context.Context, in Info, snapDir string, snap SnapshotInfo) error {
	if len(snap.Tmpfs) == 0 {
		return nil
	}
	c, err := m.supervisorClient(ctx, in.ID)
	if err != nil {
		return fmt.Errorf("restore tmpfs contents: %w", err)
	}
	for _, p := range snap.Tmpfs {
		src := filepath.Join(snapDir, "tmpfs", strings.TrimPrefix(path.Clean(p), "/"))
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(src, pw)) }()
		err := m.fileTool(ctx, c, []string{"put", strconv.FormatInt(snap.Bytes+1, 10), p}, pr, nil)
		_ = pr.CloseWithError(io.ErrClosedPipe)
		if err != nil {
			return fmt.Errorf("restore tmpfs %s: %w", p, err)
		}
	}
	return nil
}

// writeTar writes the tree under dir to w (names relative to dir).
func writeTar(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// stagedName matches what a fork or rollback stages beside a workspace
// (its ".<ws>.fork-", ".restore-" and ".old-" directories, each with
// randomHex(6)), and stagedSnapshot what a snapshot or its removal stages
// in snapshotsRoot.
var (
	stagedName     = regexp.MustCompile(`^\..+\.(fork|restore|old)-[0-9a-f]{12}$`)
	stagedSnapshot = regexp.MustCompile(`^\.(tmp-[0-9]+|rm-[0-9a-f]{12})$`)
)

// stagingLock is the file whose lock says whether staged directories are
// in use: every fork, rollback and snapshot change holds it shared for as
// long as it runs, in whatever process works on this state directory (the
// daemon and a local CLI share one); sweepStaged takes it exclusively.
func (m *DockerEngine) stagingLock() string { return filepath.Join(m.stateDir, "staging.lock") }

// staging holds the staging lock shared until release is called: a
// sweep (another process starting on this state directory) waits, and
// never removes what this operation staged.
func (m *DockerEngine) staging() (release func(), err error) {
	f, err := os.OpenFile(m.stagingLock(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("staging lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("staging lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil // closing the file drops the lock
}

// sweepStaged removes what a fork, rollback or snapshot stages and a
// crash of the daemon in the middle of it left (its subvolumes with it):
// run when the Engine is made, before it does anything, and only when no
// process holds the staging lock (one that does is still using what it
// staged: the sweep is left to a later start).
func (m *DockerEngine) sweepStaged() {
	f, err := os.OpenFile(m.stagingLock(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		m.logf("staged directories not swept: %v", err)
		return
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return // a fork, rollback or snapshot runs in another process
	}
	sweep := func(dir string, re *regexp.Regexp) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			if !e.IsDir() || !re.MatchString(e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if err := removeTree(p); err != nil {
				m.logf("left by an earlier run: %s: %v", p, err)
				continue
			}
			m.logf("removed %s, left by an earlier run", p)
		}
	}
	sweep(m.snapshotsRoot(), stagedSnapshot)
	sweep(m.wsRoot, stagedName)
	sandboxes, _ := os.ReadDir(filepath.Join(m.stateDir, "sandboxes"))
	for _, e := range sandboxes {
		if e.IsDir() {
			sweep(filepath.Join(m.stateDir, "sandboxes", e.Name()), stagedName)
		}
	}
}
