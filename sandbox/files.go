package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandboxctl/sandboxctl/api"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// MetaFiles marks, in a supervisor session's meta, a run of the file tool;
// such sessions are the files API's own and never adopted as commands.
const MetaFiles = "sandboxctl.files"

// maxListEntries bounds one directory listing.
const maxListEntries = 10000

// maxPathLen bounds a path of the files API (PATH_MAX).
const maxPathLen = 4096

// uploadWindow is how many bytes of an upload may be unacknowledged by the
// file tool: under the supervisor's stdin queue (8 MiB).
const uploadWindow = 4 << 20

// ErrFileTooLarge classes transfers over the size limit.
var ErrFileTooLarge = fmt.Errorf("%w: file transfer over the size limit", cerrdefs.ErrResourceExhausted)

// CheckFilePath validates a path of the files API: absolute, at most
// PATH_MAX bytes of UTF-8 without NUL. It is resolved inside the sandbox.
func CheckFilePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: path is empty", cerrdefs.ErrInvalidArgument)
	case !path.IsAbs(p):
		return fmt.Errorf("%w: path %q is not absolute (paths are inside the sandbox, e.g. /workspace/out.txt)", cerrdefs.ErrInvalidArgument, p)
	case len(p) > maxPathLen:
		return fmt.Errorf("%w: path is longer than %d bytes", cerrdefs.ErrInvalidArgument, maxPathLen)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: path is not valid UTF-8 or holds a NUL byte", cerrdefs.ErrInvalidArgument)
	}
	return nil
}

// fileTarget ensures scope s's sandbox and reports whether its supervisor
// takes the file tool.
func (m *DockerEngine) fileTarget(ctx context.Context, s Scope, p string) (EnsureResult, *supervisor.Client, error) {
	if err := CheckFilePath(p); err != nil {
		return EnsureResult{}, nil, err
	}
	res, err := m.ensureExisting(ctx, s)
	if err != nil {
		return res, nil, err
	}
	if m.sup == nil || !res.Supervised {
		return res, nil, nil
	}
	c, err := m.supervisorClient(ctx, res.ID)
	if err != nil {
		m.logf("sandbox %s: files: supervisor unreachable (%v); using the Engine archive API", res.Name, err)
		m.supervisorFallback("files")
		return res, nil, nil
	}
	return res, c, nil
}

// ErrNoSandbox classes a file transfer to a scope that has no sandbox.
var ErrNoSandbox = fmt.Errorf("%w: no sandbox", cerrdefs.ErrNotFound)

// noSandboxErr is the error for a file transfer to scope s, which has no
// sandbox.
func (m *DockerEngine) noSandboxErr(s Scope) error {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	name := ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	return fmt.Errorf("%w for scope %s (container %s): run a command there first (sandboxctl exec --agent %s -- true)", ErrNoSandbox, scopeKey, name, s.AgentID)
}

// ensureExisting is Ensure for a scope whose sandbox must exist already
// (the files API): a scope without one is an error naming it (wrapping
// ErrNoSandbox), never a new sandbox — a typo in an agent name must not
// create one.
func (m *DockerEngine) ensureExisting(ctx context.Context, s Scope) (EnsureResult, error) {
	name := ContainerName(m.cfg.Docker.ContainerPrefix, ScopeKey(m.cfg.Scope, s))
	missing := m.noSandboxErr(s)
	if _, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err != nil {
		if isNotFound(err) {
			return EnsureResult{}, missing
		}
		return EnsureResult{}, m.classify("inspect sandbox "+name, err)
	}
	return m.Ensure(ctx, s)
}

// StatFile describes path p (a symlink as itself) in scope s's sandbox.
func (m *DockerEngine) StatFile(ctx context.Context, s Scope, p string) (api.FileInfo, error) {
	res, c, err := m.fileTarget(ctx, s, p)
	if err != nil {
		return api.FileInfo{}, err
	}
	if c == nil {
		return m.engineStat(ctx, res.ID, p)
	}
	var out bytes.Buffer
	if err := m.fileTool(ctx, c, []string{"stat", p}, nil, &out); err != nil {
		return api.FileInfo{}, err
	}
	var fi api.FileInfo
	return fi, decodeToolJSON(out.Bytes(), &fi)
}

// ListFiles lists directory p in scope s's sandbox (at most 10000 entries).
func (m *DockerEngine) ListFiles(ctx context.Context, s Scope, p string) (api.FileList, error) {
	res, c, err := m.fileTarget(ctx, s, p)
	if err != nil {
		return api.FileList{}, err
	}
	if c == nil {
		return m.engineList(ctx, res.ID, p)
	}
	var out bytes.Buffer
	if err := m.fileTool(ctx, c, []string{"list", strconv.Itoa(maxListEntries), p}, nil, &out); err != nil {
		return api.FileList{}, err
	}
	var l api.FileList
	return l, decodeToolJSON(out.Bytes(), &l)
}

// ReadFiles writes p (a file or a directory tree) to w as a tar stream
// named from p's base name, as `docker cp` does. Over limit bytes of file
// content fails with ErrFileTooLarge, before anything is written when the
// supervisor serves it.
func (m *DockerEngine) ReadFiles(ctx context.Context, s Scope, p string, limit int64, w io.Writer) error {
	res, c, err := m.fileTarget(ctx, s, p)
	if err != nil {
		return err
	}
	if c == nil {
		return m.engineRead(ctx, res.ID, p, limit, w)
	}
	return m.fileTool(ctx, c, []string{"get", strconv.FormatInt(limit, 10), p}, nil, &cappedWriter{w: w, left: limit + tarOverhead(limit)})
}

// WriteFiles extracts the tar stream r into the existing directory dir of
// scope s's sandbox (files, directories and symlinks; no entry may leave
// dir or write through a symlink). An archive that is cut short, malformed
// or over limit changes nothing: the file tool stages it as it streams and
// commits only a complete one; the Engine path checks it whole first.
func (m *DockerEngine) WriteFiles(ctx context.Context, s Scope, dir string, limit int64, r io.Reader) error {
	res, c, err := m.fileTarget(ctx, s, dir)
	if err != nil {
		return err
	}
	if c == nil {
		f, err := spoolTar(r, limit)
		if err != nil {
			return err
		}
		defer f.Close()
		return m.engineWrite(ctx, res.ID, dir, limit, f)
	}
	return m.fileTool(ctx, c, []string{"put", strconv.FormatInt(limit, 10), dir}, r, nil)
}

// WriteFile writes r to the file p of scope s's sandbox (its directory must
// exist), replacing it atomically.
func (m *DockerEngine) WriteFile(ctx context.Context, s Scope, p string, mode fs.FileMode, limit int64, r io.Reader) error {
	res, c, err := m.fileTarget(ctx, s, p)
	if err != nil {
		return err
	}
	if c == nil {
		return m.engineWriteFile(ctx, res.ID, p, mode, limit, r)
	}
	return m.fileTool(ctx, c, []string{"write", strconv.FormatInt(limit, 10), strconv.FormatUint(uint64(mode.Perm()), 10), p}, r, nil)
}

// RemoveFile removes p (recursively) from scope s's sandbox.
func (m *DockerEngine) RemoveFile(ctx context.Context, s Scope, p string) error {
	res, c, err := m.fileTarget(ctx, s, p)
	if err != nil {
		return err
	}
	if c == nil {
		return m.engineRemove(ctx, res.ID, p)
	}
	return m.fileTool(ctx, c, []string{"rm", p}, nil, nil)
}

func decodeToolJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("files: bad answer of the file tool: %w", err)
	}
	return nil
}

// fileToolKillGrace is how long an ended file tool has to remove its
// temporary files (on SIGTERM) before SIGKILL leaves them: longer than a
// command's grace, as a disk busy with other writes can hold the removal
// for seconds.
const fileToolKillGrace = 15 * time.Second

// fileTool runs the supervisor's file tool (supervisor.FilesArg) as a
// command of the sandbox: stdin, when set, is streamed to it under the
// tool's acknowledgements; stdout, when set, receives its output. The
// session is forgotten afterwards.
func (m *DockerEngine) fileTool(ctx context.Context, c *supervisor.Client, args []string, stdin io.Reader, stdout io.Writer) error {
	return runFileTool(ctx, c, SupervisorPath, args, stdin, stdout)
}

// runFileTool is fileTool for a supervisor binary at tool in the sandbox
// (every engine's sandboxes run the same file tool).
func runFileTool(ctx context.Context, c *supervisor.Client, tool string, args []string, stdin io.Reader, stdout io.Writer) error {
	p, err := c.Open(ctx, supervisor.OpenSpec{
		Argv:      append([]string{tool, supervisor.FilesArg}, args...),
		Env:       []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + HomeDir},
		Dir:       "/",
		KeepStdin: stdin != nil,
		Meta:      map[string]string{MetaFiles: args[0]},
	})
	if err != nil {
		return fmt.Errorf("files %s: start the file tool: %w", args[0], err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fileToolKillGrace+10*time.Second)
		defer cancel()
		if !isDone(p.Done()) {
			_ = p.KillGrace(fctx, fileToolKillGrace)
		}
		_ = c.Forget(fctx, p.ID())
	}()
	var stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&limitedBuffer{b: &stderr, n: 4096}, p.Stderr())
	}()
	var copyErr error
	if stdin != nil {
		copyErr = upload(ctx, p, stdin)
	} else {
		if stdout == nil {
			stdout = io.Discard
		}
		// The tool is a process of the sandbox: the daemon bounds what
		// it takes from it whatever the tool says. A download's writer
		// carries its own bound (its limit); the rest is capped here.
		out := stdout
		if _, capped := stdout.(*cappedWriter); !capped {
			out = &cappedWriter{w: stdout, left: outputCap}
		}
		done := make(chan error, 1)
		go func() { _, err := io.Copy(out, p.Stdout()); done <- err }()
		select {
		case copyErr = <-done:
		case <-ctx.Done():
			copyErr = ctx.Err()
		}
	}
	if copyErr != nil && ctx.Err() != nil {
		return fmt.Errorf("files %s: %w", args[0], ctx.Err())
	}
	killed := false
	if copyErr != nil && !isDone(p.Done()) {
		// Nobody reads its output any more: end it before waiting.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fileToolKillGrace+10*time.Second)
		_ = p.KillGrace(kctx, fileToolKillGrace)
		cancel()
		killed = true
	}
	code, sig, err := p.Wait(ctx)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("files %s: %w", args[0], err)
	}
	msg := strings.TrimSpace(stderr.String())
	switch {
	case killed:
		// We ended it (by a signal, or it exited on one after removing
		// its temporary files): why is copyErr (the upload broke off or
		// went over its limit).
		return fmt.Errorf("files %s: %w", args[0], copyErr)
	case sig != "":
		return fmt.Errorf("files %s: the file tool was killed by %s", args[0], sig)
	case code == supervisor.FilesExitOK && copyErr != nil:
		return fmt.Errorf("files %s: %w", args[0], copyErr)
	case code == supervisor.FilesExitOK:
		return nil
	case code == supervisor.FilesExitNotFound:
		return fmt.Errorf("%w: %s", cerrdefs.ErrNotFound, msg)
	case code == supervisor.FilesExitInvalid:
		return fmt.Errorf("%w: %s", cerrdefs.ErrInvalidArgument, msg)
	case code == supervisor.FilesExitTooLarge:
		return fmt.Errorf("%w: %s", ErrFileTooLarge, msg)
	case code == supervisor.FilesExitDenied:
		return fmt.Errorf("%w: %s", cerrdefs.ErrPermissionDenied, msg)
	}
	return fmt.Errorf("files %s: exit %d: %s", args[0], code, msg)
}

// upload streams r to p's stdin, keeping at most uploadWindow bytes ahead
// of the tool's acknowledgements, then closes it.
func upload(ctx context.Context, p *supervisor.Proc, r io.Reader) error {
	var mu sync.Mutex
	acked := int64(0)
	moved := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(p.Stdout())
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				mu.Lock()
				acked = n
				mu.Unlock()
				select {
				case moved <- struct{}{}:
				default:
				}
			}
		}
	}()
	buf := make([]byte, 256<<10)
	var sent int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			for {
				mu.Lock()
				ahead := sent - acked
				mu.Unlock()
				if ahead+int64(n) <= uploadWindow {
					break
				}
				select {
				case <-moved:
				case <-p.Done():
					return nil // the tool ended early: its exit says why
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if _, err := p.Write(buf[:n]); err != nil {
				if isDone(p.Done()) {
					return nil
				}
				return err
			}
			sent += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			return p.CloseStdin()
		}
		if rerr != nil {
			return fmt.Errorf("read the upload: %w", rerr)
		}
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// outputCap bounds the output the daemon takes from the file tool when
// it lists or stats (a listing of 10000 entries is a few MiB); a download
// is bounded by its own limit instead (ReadFiles).
const outputCap = 64 << 20

// tarOverhead is what a tar stream may add to limit bytes of content:
// headers, padding and long names (generous: 1/8 plus 1 MiB).
func tarOverhead(limit int64) int64 { return limit/8 + 1<<20 }

// cappedWriter fails once more than left bytes were written.
type cappedWriter struct {
	w    io.Writer
	left int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, fmt.Errorf("%w: the sandbox sent more than its limit", ErrFileTooLarge)
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// --- The Engine archive API: sandboxes without a (reachable) supervisor.
// The Engine resolves paths inside the container's root; it does not see
// the container's tmpfs mounts (a documented limit of that path).

func (m *DockerEngine) engineStat(ctx context.Context, id, p string) (api.FileInfo, error) {
	st, err := m.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: p})
	if err != nil {
		return api.FileInfo{}, m.fileEngineErr("stat "+p, err)
	}
	fi := api.FileInfo{Name: st.Stat.Name, Path: p, Size: st.Stat.Size, Mode: uint32(st.Stat.Mode.Perm()), ModTime: st.Stat.Mtime.UTC(), LinkTarget: st.Stat.LinkTarget}
	switch {
	case st.Stat.Mode.IsRegular():
		fi.Type = "file"
	case st.Stat.Mode.IsDir():
		fi.Type, fi.Size = "dir", 0
	case st.Stat.Mode&fs.ModeSymlink != 0:
		fi.Type = "symlink"
	default:
		fi.Type = "other"
	}
	return fi, nil
}

func (m *DockerEngine) fileEngineErr(op string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %s: no such file or directory in the sandbox", cerrdefs.ErrNotFound, op)
	}
	if cerrdefs.IsInvalidArgument(err) || cerrdefs.IsPermissionDenied(err) || cerrdefs.IsConflict(err) {
		return fmt.Errorf("files: %s: %w", op, err)
	}
	return m.classify("files: "+op, err)
}

// countingTar fails once more than limit bytes of file content went through.
type countingTar struct {
	limit, total int64
}

func (c *countingTar) add(hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeReg {
		c.total += hdr.Size
		if c.total > c.limit {
			return fmt.Errorf("%w: more than %d bytes", ErrFileTooLarge, c.limit)
		}
	}
	return nil
}

func (m *DockerEngine) engineRead(ctx context.Context, id, p string, limit int64, w io.Writer) error {
	if st, err := m.engineStat(ctx, id, p); err != nil {
		return err
	} else if st.Size > limit {
		return fmt.Errorf("%w: %s is %d bytes, over the limit of %d bytes", ErrFileTooLarge, p, st.Size, limit)
	}
	res, err := m.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: p})
	if err != nil {
		return m.fileEngineErr("read "+p, err)
	}
	defer res.Content.Close()
	// Re-encode entry by entry so the limit holds for directories too.
	tr := tar.NewReader(res.Content)
	tw := tar.NewWriter(w)
	count := countingTar{limit: limit}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("files: read %s: %w", p, err)
		}
		if err := count.add(hdr); err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

func (m *DockerEngine) engineList(ctx context.Context, id, p string) (api.FileList, error) {
	st, err := m.engineStat(ctx, id, p)
	if err != nil {
		return api.FileList{}, err
	}
	if st.Type != "dir" {
		return api.FileList{}, fmt.Errorf("%w: %s is not a directory", cerrdefs.ErrInvalidArgument, p)
	}
	res, err := m.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: p})
	if err != nil {
		return api.FileList{}, m.fileEngineErr("list "+p, err)
	}
	defer res.Content.Close()
	out := api.FileList{Path: p, Entries: []api.FileInfo{}}
	tr := tar.NewReader(res.Content)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return api.FileList{}, fmt.Errorf("files: list %s: %w", p, err)
		}
		parts := strings.Split(strings.Trim(hdr.Name, "/"), "/")
		if len(parts) != 2 {
			continue
		}
		if len(out.Entries) == maxListEntries {
			out.Truncated = true
			return out, nil
		}
		fi := hdr.FileInfo()
		e := api.FileInfo{Name: parts[1], Path: path.Join(p, parts[1]), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), ModTime: hdr.ModTime.UTC(), LinkTarget: hdr.Linkname}
		switch hdr.Typeflag {
		case tar.TypeReg:
			e.Type = "file"
		case tar.TypeDir:
			e.Type, e.Size = "dir", 0
		case tar.TypeSymlink:
			e.Type = "symlink"
		default:
			e.Type = "other"
		}
		out.Entries = append(out.Entries, e)
	}
}

func (m *DockerEngine) engineWrite(ctx context.Context, id, dir string, limit int64, r io.Reader) error {
	if st, err := m.engineStat(ctx, id, dir); err != nil {
		return err
	} else if st.Type != "dir" {
		return fmt.Errorf("%w: %s is not a directory", cerrdefs.ErrInvalidArgument, dir)
	}
	uid, gid, err := m.containerOwner(ctx, id)
	if err != nil {
		return err
	}
	// Check the stream on its way: entries must stay under dir, the size
	// limit holds, and what is written belongs to the sandbox's user.
	pr, pw := io.Pipe()
	go func() {
		tr := tar.NewReader(r)
		tw := tar.NewWriter(pw)
		count := countingTar{limit: limit}
		parents := tarParents{}
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				pw.CloseWithError(tw.Close())
				return
			}
			if err == nil {
				err = checkEntryName(hdr.Name)
			}
			if err == nil {
				err = count.add(hdr)
			}
			if err == nil {
				// Parents the archive does not list would be made by
				// the Engine as root: list them, the user's.
				err = parents.add(tw, hdr, uid, gid)
			}
			if err == nil {
				// A sandbox identity's uid (2000000000 and up) does not
				// fit USTAR's octal field: let the writer pick PAX.
				hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = uid, gid, "", ""
				hdr.Format = tar.FormatUnknown
				delete(hdr.PAXRecords, "uid")
				delete(hdr.PAXRecords, "gid")
				err = tw.WriteHeader(hdr)
			}
			if err == nil {
				_, err = io.Copy(tw, tr)
			}
			if err != nil {
				// Wrapped: archive/tar's headerError is a slice, which
				// net/http compares with == when the body fails (panic).
				pw.CloseWithError(fmt.Errorf("files: %w", err))
				return
			}
		}
	}()
	_, err = m.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: pr})
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		var perr error
		if errors.Is(err, ErrFileTooLarge) || cerrdefs.IsInvalidArgument(err) {
			perr = err
		}
		if perr != nil {
			return perr
		}
		return m.fileEngineErr("write into "+dir, err)
	}
	return nil
}

// tarParents adds the directory entries a tar stream leaves implicit.
type tarParents map[string]bool

func (t tarParents) add(tw *tar.Writer, hdr *tar.Header, uid, gid int) error {
	clean := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
	var missing []string
	for dir := path.Dir(clean); dir != "." && dir != "/" && !t[dir]; dir = path.Dir(dir) {
		missing = append(missing, dir)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		t[missing[i]] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: missing[i] + "/", Mode: 0o755, Uid: uid, Gid: gid, ModTime: time.Now()}); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeDir {
		t[clean] = true
	}
	return nil
}

// containerOwner is the numeric uid and gid the container's processes run
// as (0:0 for a named user such as root).
func (m *DockerEngine) containerOwner(ctx context.Context, id string) (uid, gid int, err error) {
	insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, 0, m.fileEngineErr("inspect the sandbox", err)
	}
	if insp.Container.Config == nil {
		return 0, 0, nil
	}
	if ident, ok := identityOf(insp.Container.Config.Labels); ok {
		return int(ident.Command), int(ident.Command), nil
	}
	u, g, _ := strings.Cut(insp.Container.Config.User, ":")
	uid, _ = strconv.Atoi(u)
	gid, _ = strconv.Atoi(g)
	return uid, gid, nil
}

func checkEntryName(name string) error {
	if path.IsAbs(name) || strings.Contains("/"+strings.TrimSuffix(name, "/")+"/", "/../") {
		return fmt.Errorf("%w: archive entry %q leaves the destination", cerrdefs.ErrInvalidArgument, name)
	}
	return nil
}

// spoolTar reads the tar stream r into an unlinked temporary file and
// checks it before any of it reaches the Engine, which extracts as it
// reads: at most limit bytes of files in a well-formed stream. The file is
// positioned at its start.
func spoolTar(r io.Reader, limit int64) (*os.File, error) {
	f, err := os.CreateTemp("", "sandboxctl-upload-*")
	if err != nil {
		return nil, fmt.Errorf("files: spool the upload: %w", err)
	}
	_ = os.Remove(f.Name())
	if err := checkSpooledTar(f, r, limit); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkSpooledTar(f *os.File, r io.Reader, limit int64) error {
	max := limit + tarOverhead(limit)
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if err != nil {
		return fmt.Errorf("files: read the upload: %w", err)
	}
	if n > max {
		return fmt.Errorf("%w: the upload is over the limit of %d bytes", ErrFileTooLarge, limit)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	count := countingTar{limit: limit}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = checkEntryName(hdr.Name)
		}
		if err == nil {
			err = count.add(hdr)
		}
		if err != nil {
			if cerrdefs.IsInvalidArgument(err) || errors.Is(err, ErrFileTooLarge) {
				return err
			}
			return fmt.Errorf("%w: bad tar stream: %v", cerrdefs.ErrInvalidArgument, err)
		}
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

func (m *DockerEngine) engineWriteFile(ctx context.Context, id, p string, mode fs.FileMode, limit int64, r io.Reader) error {
	// A tar header needs the size first: spool to a temporary file.
	f, err := os.CreateTemp("", "sandboxctl-upload-*")
	if err != nil {
		return fmt.Errorf("files: spool the upload: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("files: spool the upload: %w", err)
	}
	if n > limit {
		return fmt.Errorf("%w: the upload is larger than the limit of %d bytes", ErrFileTooLarge, limit)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Base(p), Size: n, Mode: int64(mode.Perm()), ModTime: time.Now()})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return m.engineWrite(ctx, id, path.Dir(p), limit, pr)
}

func (m *DockerEngine) engineRemove(ctx context.Context, id, p string) error {
	if path.Clean(p) == "/" {
		return fmt.Errorf("%w: refusing to remove /", cerrdefs.ErrInvalidArgument)
	}
	if _, err := m.engineStat(ctx, id, p); err != nil {
		return err
	}
	out, code, err := m.run(ctx, id, []string{"rm", "-rf", "--", p})
	if err != nil {
		return fmt.Errorf("files: remove %s: %w", p, err)
	}
	if code != 0 {
		return fmt.Errorf("files: remove %s: exit %d: %s", p, code, lastN(strings.TrimSpace(out), 300))
	}
	return nil
}
