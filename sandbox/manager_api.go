package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// This file routes the Manager's calls to its Engines (engines.go): a call
// about a scope goes to the Engine serving it (placing a new sandbox when
// the call creates one), a call about a container to the Engine holding
// it, and a call about every sandbox to every Engine that answers. A call
// that needs no Engine (the layout, the state directory's snapshots) is
// answered by the first; every Engine of a Manager has the same layout.

// first is the first configured Engine, which answers for the host side
// every Engine of the Manager shares (Manager.local).
func (m *Manager) first() *DockerEngine { return m.local }

// onlyEngine is the Engine of a Manager of one; with several, what is not
// supported across Engines yet is a bad-input error naming it.
func (m *Manager) onlyEngine(what string) (engine, error) {
	mb := m.fleet.one()
	if mb == nil {
		return nil, fmt.Errorf("%w: %s not supported with several Engines (sandbox.engines) yet", errBadInput, what)
	}
	return mb.m, nil
}

func (m *Manager) scopeLock(key string) *sync.Mutex { return m.scopeLocks.of(key) }

// existing is the Engine serving scope s, whose sandbox must exist already
// (the files API): ErrNoSandbox naming the scope when none does.
func (m *Manager) existing(ctx context.Context, s Scope) (engine, error) {
	mb, err := m.memberFor(ctx, s, false)
	if err != nil {
		return nil, err
	}
	if mb == nil {
		return nil, m.first().noSandboxErr(s)
	}
	return mb.m, nil
}

// byRef is the Engine holding the sandbox whose id, id prefix or name is
// ref (with several Engines: found by listing them; a ref none holds goes
// to the first, which answers ErrNotFound).
func (m *Manager) byRef(ctx context.Context, ref string) (engine, error) {
	if mb := m.fleet.one(); mb != nil {
		return mb.m, nil
	}
	in, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	mb, err := m.memberByID(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return mb.m, nil
}

// Supervised reports whether new sandboxes run the in-container supervisor
// (false: the plain Engine exec path, e.g. no supervisor binary was found).
func (m *Manager) Supervised() bool {
	if m.backend != nil {
		return m.backend.Caps().SupervisorPath != ""
	}
	return m.first().Supervised()
}

// Close removes the untaken sandboxes of the warm pools, releases the
// Engine clients the Manager created and flushes last-used times.
func (m *Manager) Close() error {
	defer m.reg.flush()
	return m.fleet.close()
}

// Config returns the sandbox configuration in force.
func (m *Manager) Config() Config { return m.cfg }

// Client returns the first Engine's client (for benchmarks and tests);
// nil for a Manager over a Backend, which has no Docker Engine.
func (m *Manager) Client() *client.Client {
	if m.backend != nil {
		return nil
	}
	return m.first().Client()
}

// Ping checks that the Engines answer (with several: it reports those
// that do not).
func (m *Manager) Ping(ctx context.Context) error {
	if mb := m.fleet.one(); mb != nil {
		return mb.m.Ping(ctx)
	}
	return m.fleet.ping(ctx)
}

// Layout returns the scope key, container name, agent workspace (host path)
// and access mode for s without touching an Engine.
//
// Over a Backend the workspace is the sandbox's own volume, not a host
// directory: agentWorkspace is "".
func (m *Manager) Layout(s Scope) (scopeKey, name, agentWorkspace string, access workdir.Access) {
	if m.backend != nil {
		scopeKey = ScopeKey(m.cfg.Scope, s)
		return scopeKey, ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey), "", workdir.AccessRW
	}
	return m.first().Layout(s)
}

// WorkspaceRoot is the host directory holding the agent workspaces.
// It is "" over a Backend (workspaces are the sandboxes' volumes).
func (m *Manager) WorkspaceRoot() string {
	if m.backend != nil {
		return ""
	}
	return m.first().WorkspaceRoot()
}

// Workspace returns the host directory of the agent workspace of the
// sandbox in (what Delete with workspace removes).
// It is "" over a Backend.
func (m *Manager) Workspace(in Info) string {
	if m.backend != nil {
		return ""
	}
	return m.first().Workspace(in)
}

// Remove force-removes the sandbox of scope s. ErrNotFound when none exists.
func (m *Manager) Remove(ctx context.Context, s Scope) error {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	return m.RemoveByName(ctx, ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey))
}

// ExecIn starts a command in the container id (which must be running).
func (m *Manager) ExecIn(ctx context.Context, containerID string, opts ExecOptions) (*Exec, error) {
	mb, err := m.memberByID(ctx, containerID)
	if err != nil {
		return nil, err
	}
	return mb.m.ExecIn(ctx, containerID, opts)
}

// KillTagged kills every process in the container whose environment
// carries the run tag (see killScript).
func (m *Manager) KillTagged(ctx context.Context, containerID, tag string, grace time.Duration) error {
	mb, err := m.memberByID(ctx, containerID)
	if err != nil {
		return err
	}
	return mb.m.KillTagged(ctx, containerID, tag, grace)
}

// Run is a convenience for tests and tools: run cmd in scope s's sandbox and
// return the combined output and exit code.
func (m *Manager) Run(ctx context.Context, s Scope, cmd []string) (string, int, error) {
	mb, err := m.memberFor(ctx, s, true)
	if err != nil {
		return "", -1, err
	}
	return mb.m.Run(ctx, s, cmd)
}

// Attach ensures scope s's sandbox and starts opts.Cmd in it on the plain
// Engine exec path.
func (m *Manager) Attach(ctx context.Context, s Scope, opts ExecOptions) (*Exec, EnsureResult, error) {
	mb, err := m.memberFor(ctx, s, true)
	if err != nil {
		return nil, EnsureResult{}, err
	}
	x, res, err := mb.m.Attach(ctx, s, opts)
	m.fleet.noteID(res.ID, mb)
	return x, res, err
}

// Reattach follows a session listed by Sessions on the Engine that holds
// it.
func (m *Manager) Reattach(ctx context.Context, rs RecoveredSession) (*SupervisedExec, error) {
	mb, err := m.memberNamed(rs.Engine)
	if err != nil {
		return nil, err
	}
	return mb.m.Reattach(ctx, rs)
}

// ForgetSession drops a finished session from its sandbox's supervisor.
func (m *Manager) ForgetSession(ctx context.Context, containerID, id string) error {
	mb, err := m.memberByID(ctx, containerID)
	if err != nil {
		return err
	}
	return mb.m.ForgetSession(ctx, containerID, id)
}

// DialPort connects to port on the loopback of scope s's existing sandbox
// (see DockerEngine.DialPort), on the Engine that holds it.
func (m *Manager) DialPort(ctx context.Context, s Scope, port int) (net.Conn, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	e, err := m.existing(ctx, s)
	if err != nil {
		return nil, err
	}
	return e.DialPort(ctx, s, port)
}

// StatFile describes path p in scope s's sandbox.
func (m *Manager) StatFile(ctx context.Context, s Scope, p string) (api.FileInfo, error) {
	e, err := m.existing(ctx, s)
	if err != nil {
		return api.FileInfo{}, err
	}
	return e.StatFile(ctx, s, p)
}

// ListFiles lists directory p in scope s's sandbox.
func (m *Manager) ListFiles(ctx context.Context, s Scope, p string) (api.FileList, error) {
	e, err := m.existing(ctx, s)
	if err != nil {
		return api.FileList{}, err
	}
	return e.ListFiles(ctx, s, p)
}

// ReadFiles writes path p of scope s's sandbox to w as a tar stream.
func (m *Manager) ReadFiles(ctx context.Context, s Scope, p string, limit int64, w io.Writer) error {
	e, err := m.existing(ctx, s)
	if err != nil {
		return err
	}
	return e.ReadFiles(ctx, s, p, limit, w)
}

// WriteFiles unpacks the tar stream r into dir of scope s's sandbox.
func (m *Manager) WriteFiles(ctx context.Context, s Scope, dir string, limit int64, r io.Reader) error {
	e, err := m.existing(ctx, s)
	if err != nil {
		return err
	}
	return e.WriteFiles(ctx, s, dir, limit, r)
}

// WriteFile writes r to path p of scope s's sandbox.
func (m *Manager) WriteFile(ctx context.Context, s Scope, p string, mode fs.FileMode, limit int64, r io.Reader) error {
	e, err := m.existing(ctx, s)
	if err != nil {
		return err
	}
	return e.WriteFile(ctx, s, p, mode, limit, r)
}

// RemoveFile removes path p of scope s's sandbox.
func (m *Manager) RemoveFile(ctx context.Context, s Scope, p string) error {
	e, err := m.existing(ctx, s)
	if err != nil {
		return err
	}
	return e.RemoveFile(ctx, s, p)
}

// PruneSupervisedImages removes stale derived images on every Engine that
// answers and returns their tags.
func (m *Manager) PruneSupervisedImages(ctx context.Context) ([]string, error) {
	return collect(m.fleet, func(mb *member) ([]string, error) { return mb.m.PruneSupervisedImages(ctx) })
}

// Create makes a sandbox for scope s from a template, with labels and a
// TTL, and returns it (a Manager of one Engine only, yet).
func (m *Manager) Create(ctx context.Context, s Scope, o CreateOptions) (Info, error) {
	if err := o.check(m.cfg); err != nil {
		return Info{}, err
	}
	e, err := m.onlyEngine("creating a sandbox with a template is")
	if err != nil {
		return Info{}, err
	}
	return e.Create(ctx, s, o)
}

// ListFiltered is List with a filter.
func (m *Manager) ListFiltered(ctx context.Context, f ListFilter) ([]Info, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	return filterInfos(list, f), nil
}

// Get returns the sandbox whose id, unique id prefix (4 characters at
// least) or name is ref; ErrNotFound when none.
func (m *Manager) Get(ctx context.Context, ref string) (Info, error) {
	if mb := m.fleet.one(); mb != nil {
		return mb.m.Get(ctx, ref)
	}
	list, err := m.List(ctx)
	if err != nil {
		return Info{}, err
	}
	return findRef(list, ref)
}

// Delete removes the sandbox ref (and, with workspace, its workspace).
func (m *Manager) Delete(ctx context.Context, ref string, workspace bool) (Info, error) {
	e, err := m.byRef(ctx, ref)
	if err != nil {
		return Info{}, err
	}
	return e.Delete(ctx, ref, workspace)
}

// Pause freezes the sandbox ref (see DockerEngine.Pause).
func (m *Manager) Pause(ctx context.Context, ref string) (Info, error) {
	e, err := m.byRef(ctx, ref)
	if err != nil {
		return Info{}, err
	}
	return e.Pause(ctx, ref)
}

// Resume thaws the sandbox ref.
func (m *Manager) Resume(ctx context.Context, ref string) (Info, error) {
	e, err := m.byRef(ctx, ref)
	if err != nil {
		return Info{}, err
	}
	return e.Resume(ctx, ref)
}

// Extend sets the TTL of the sandbox ref to ttl from now.
func (m *Manager) Extend(ctx context.Context, ref string, ttl time.Duration) (Info, error) {
	e, err := m.byRef(ctx, ref)
	if err != nil {
		return Info{}, err
	}
	return e.Extend(ctx, ref, ttl)
}

// ExpireDue removes the sandboxes whose TTL passed and returns them (a
// Manager of several Engines makes no sandboxes with a TTL: Create).
func (m *Manager) ExpireDue(ctx context.Context) ([]Info, error) {
	if mb := m.fleet.one(); mb != nil {
		return mb.m.ExpireDue(ctx)
	}
	return nil, nil
}

// PauseIdle pauses the idle supervised sandboxes of every Engine that
// answers (see DockerEngine.PauseIdle) and returns how many it paused.
func (m *Manager) PauseIdle(ctx context.Context) (int, error) {
	n := 0
	err := m.fleet.eachHealthy(func(mb *member) error {
		k, err := mb.m.PauseIdle(ctx)
		n += k
		return err
	})
	return n, err
}

// StartPool starts filling the warm pools now rather than at the first
// sandbox call (a daemon calls it at start): each Engine keeps a pool of
// its own (its Ensure takes from it).
func (m *Manager) StartPool() {
	for _, mb := range m.fleet.members {
		mb.m.startPool()
	}
}

// Pool reports the state of the warm pools, summed over the Engines.
func (m *Manager) Pool() PoolStatus {
	var st PoolStatus
	for _, mb := range m.fleet.members {
		ms := mb.m.Pool()
		st.Size, st.Ready = st.Size+ms.Size, st.Ready+ms.Ready
		if ms.LastErr != "" {
			st.LastErr = ms.LastErr
		}
	}
	return st
}

// WaitPool starts the pools and waits until they hold their full size (for
// benchmarks, tests, and a daemon that wants them warm before serving).
func (m *Manager) WaitPool(ctx context.Context) error {
	if m.backend == nil && m.first().poolTotal() == 0 {
		return nil
	}
	m.StartPool()
	for {
		st := m.Pool()
		if st.Ready >= st.Size {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox pool: %d of %d ready (%s): %w", st.Ready, st.Size, st.LastErr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SnapshotMethod is the method a snapshot of the workspace would use now.
// It is "" over a Backend (no snapshots).
func (m *Manager) SnapshotMethod() string {
	if m.backend != nil {
		return ""
	}
	return m.first().SnapshotMethod()
}

// noSnapshots is the error of the snapshot calls over a Backend.
func (m *Manager) noSnapshots() error {
	if m.backend != nil {
		return notImplemented(m.backend.Name(), "snapshots are")
	}
	return nil
}

// Snapshot takes a snapshot of scope s's sandbox named name.
func (m *Manager) Snapshot(ctx context.Context, s Scope, name string) (SnapshotInfo, error) {
	e, err := m.onlyEngine("snapshots are")
	if err != nil {
		return SnapshotInfo{}, err
	}
	return e.Snapshot(ctx, s, name)
}

// Snapshots lists scope s's snapshots.
func (m *Manager) Snapshots(s Scope) ([]SnapshotInfo, error) {
	if err := m.noSnapshots(); err != nil {
		return nil, err
	}
	return m.first().Snapshots(s)
}

// SnapshotOf returns scope s's snapshot name.
func (m *Manager) SnapshotOf(s Scope, name string) (SnapshotInfo, error) {
	if err := m.noSnapshots(); err != nil {
		return SnapshotInfo{}, err
	}
	return m.first().SnapshotOf(s, name)
}

// RemoveSnapshot removes scope s's snapshot name.
func (m *Manager) RemoveSnapshot(s Scope, name string) (SnapshotInfo, error) {
	if err := m.noSnapshots(); err != nil {
		return SnapshotInfo{}, err
	}
	return m.first().RemoveSnapshot(s, name)
}

// PruneSnapshots removes scope s's snapshots older than olderThan beyond
// the newest keep.
func (m *Manager) PruneSnapshots(s Scope, olderThan time.Duration, keep int) ([]SnapshotInfo, error) {
	if err := m.noSnapshots(); err != nil {
		return nil, err
	}
	return m.first().PruneSnapshots(s, olderThan, keep)
}

// Rollback puts scope s's sandbox back to its snapshot name.
func (m *Manager) Rollback(ctx context.Context, s Scope, name string) (Info, error) {
	e, err := m.onlyEngine("snapshots are")
	if err != nil {
		return Info{}, err
	}
	return e.Rollback(ctx, s, name)
}

// Fork makes scope to's sandbox from scope from's snapshot name.
func (m *Manager) Fork(ctx context.Context, from Scope, name string, to Scope) (Info, error) {
	e, err := m.onlyEngine("snapshots are")
	if err != nil {
		return Info{}, err
	}
	return e.Fork(ctx, from, name, to)
}

// ReleaseWorkspaceVolume unmounts the quota volume of scope s's workspace
// and deletes its image (and so the workspace's files).
//
// Over a Backend there is none (the workspace goes with its sandbox).
func (m *Manager) ReleaseWorkspaceVolume(s Scope) error {
	if m.backend != nil {
		return nil
	}
	return m.first().ReleaseWorkspaceVolume(s)
}
