package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor/tarstream"
)

// FilesArg, as the first argument of the supervisor binary, makes it the
// file tool of the files API: `supervisor --files OP ARGS...` (see the
// package doc, "Files"). It runs as a command of the sandbox, so every path
// it touches is resolved by the kernel inside the container's root and
// mount namespace, as the sandbox's user.
const FilesArg = "--files"

// Exit codes of the file tool; its stderr carries the one-line message.
const (
	FilesExitOK       = 0
	FilesExitFailed   = 1
	FilesExitNotFound = 2
	FilesExitTooLarge = 3
	FilesExitInvalid  = 4
	FilesExitDenied   = 5
)

// FilesAckEvery is how many bytes of stdin the put and write ops consume
// between two acknowledgements on stdout (a decimal byte count and a
// newline). A client keeps at most a few of these unacknowledged, under the
// server's stdin queue (maxStdinQueue).
const FilesAckEvery = 1 << 20

// filesError is a failure of the file tool with its exit code.
type filesError struct {
	code int
	msg  string
}

func (e *filesError) Error() string { return e.msg }

func filesErr(code int, format string, args ...any) error {
	return &filesError{code: code, msg: fmt.Sprintf(format, args...)}
}

// fsErr maps an error of the file system to the tool's exit code.
func fsErr(err error) error {
	var fe *filesError
	switch {
	case errors.As(err, &fe):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &filesError{code: FilesExitNotFound, msg: err.Error()}
	case errors.Is(err, fs.ErrPermission):
		return &filesError{code: FilesExitDenied, msg: err.Error()}
	}
	return &filesError{code: FilesExitFailed, msg: err.Error()}
}

// RunFiles is the file tool (args after FilesArg). It returns the process
// exit code after writing any message to stderr.
//
// A put or write that is ended by SIGTERM, SIGINT or SIGHUP (the tree kill
// of a restarted daemon that finds the transfer orphaned, issue 32 item 7)
// removes its temporary file before it exits, so that no
// .sandboxctl-upload-* file stays in the workspace.
func RunFiles(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	tmps := &uploadTemps{paths: map[string]struct{}{}}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		tmps.abandon()
		fmt.Fprintf(stderr, "files: ended by %s; the partial upload was removed\n", sig)
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	err := runFiles(args, stdin, stdout, tmps)
	if err == nil {
		return FilesExitOK
	}
	err = fsErr(err)
	fmt.Fprintln(stderr, err.Error())
	return err.(*filesError).code
}

func runFiles(args []string, stdin io.Reader, stdout io.Writer, tmps *uploadTemps) error {
	if len(args) < 2 {
		return filesErr(FilesExitInvalid, "files: want OP ... PATH")
	}
	op, p := args[0], args[len(args)-1]
	if !path.IsAbs(p) {
		return filesErr(FilesExitInvalid, "path %q is not absolute", p)
	}
	num := func(i int) (int64, error) {
		if i >= len(args)-1 {
			return 0, filesErr(FilesExitInvalid, "files %s: missing argument", op)
		}
		n, err := strconv.ParseInt(args[i], 0, 64)
		if err != nil || n < 0 {
			return 0, filesErr(FilesExitInvalid, "files %s: bad number %q", op, args[i])
		}
		return n, nil
	}
	switch op {
	case "stat":
		fi, err := statPath(p)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(fi)
	case "list":
		limit, err := num(1)
		if err != nil {
			return err
		}
		l, err := listDir(p, int(limit))
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(l)
	case "get":
		limit, err := num(1)
		if err != nil {
			return err
		}
		return getTar(p, limit, stdout)
	case "put":
		limit, err := num(1)
		if err != nil {
			return err
		}
		return putTar(p, limit, &ackReader{r: stdin, w: stdout}, tmps)
	case "write":
		limit, err := num(1)
		if err != nil {
			return err
		}
		mode, err := num(2)
		if err != nil {
			return err
		}
		return writeFile(p, limit, fs.FileMode(mode)&fs.ModePerm, &ackReader{r: stdin, w: stdout}, tmps)
	case "rm":
		return removePath(p)
	}
	return filesErr(FilesExitInvalid, "files: unknown op %q", op)
}

func infoOf(p string, fi fs.FileInfo) api.FileInfo {
	out := api.FileInfo{Name: fi.Name(), Path: p, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime().UTC()}
	switch {
	case fi.Mode().IsRegular():
		out.Type = "file"
	case fi.IsDir():
		out.Type, out.Size = "dir", 0
	case fi.Mode()&fs.ModeSymlink != 0:
		out.Type = "symlink"
		out.LinkTarget, _ = os.Readlink(p)
	default:
		out.Type = "other"
	}
	return out
}

// statPath describes p itself (a symlink as a symlink).
func statPath(p string) (api.FileInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return api.FileInfo{}, err
	}
	return infoOf(p, fi), nil
}

func listDir(p string, limit int) (api.FileList, error) {
	if limit <= 0 {
		limit = 10000
	}
	f, err := os.Open(p)
	if err != nil {
		return api.FileList{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return api.FileList{}, err
	} else if !fi.IsDir() {
		return api.FileList{}, filesErr(FilesExitInvalid, "%s is not a directory", p)
	}
	names, err := f.Readdirnames(limit + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return api.FileList{}, err
	}
	out := api.FileList{Path: p, Entries: []api.FileInfo{}}
	if len(names) > limit {
		names, out.Truncated = names[:limit], true
	}
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(p, n))
		if err != nil {
			continue // removed meanwhile
		}
		out.Entries = append(out.Entries, infoOf(filepath.Join(p, n), fi))
	}
	sortInfos(out.Entries)
	return out, nil
}

func sortInfos(v []api.FileInfo) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j].Name < v[j-1].Name; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// getTar writes p (a file, a symlink as itself, or a directory and
// everything under it, its symlinks as symlinks) as a tar stream whose
// entries are named from p's base name, as `docker cp` does. The total of the files' sizes must not
// exceed limit; that is checked before anything is written.
func getTar(p string, limit int64, w io.Writer) error {
	root, err := os.Lstat(p)
	if err != nil {
		return err
	}
	base := filepath.Base(p)
	if base == "/" {
		base = "."
	}
	var total int64
	if root.IsDir() {
		err = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				fi, err := d.Info()
				if err != nil {
					return err
				}
				total += fi.Size()
				if total > limit {
					return filesErr(FilesExitTooLarge, "%s holds more than the limit of %d bytes", p, limit)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	} else if total = root.Size(); root.Mode().IsRegular() && total > limit {
		return filesErr(FilesExitTooLarge, "%s is %d bytes, over the limit of %d bytes", p, total, limit)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tarstream.NewWriter(bw)
	if !root.IsDir() {
		if err := tarEntry(tw, p, base, root); err != nil {
			return err
		}
	} else {
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(p, q)
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if q == p {
				fi = root
			}
			return tarEntry(tw, q, path.Join(base, filepath.ToSlash(rel)), fi)
		})
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func tarEntry(tw *tarstream.Writer, p, name string, fi fs.FileInfo) error {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() && link == "" {
		return nil // sockets, devices, fifos: not archived
	}
	hdr := fileHeader(fi, name, link)
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
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		return fmt.Errorf("%s changed while it was read: %w", p, err)
	}
	return nil
}

// fileHeader is the tar header of the file fi, archived as name (a
// directory's with a trailing slash): type, permission and
// setuid/setgid/sticky bits, owner ids, size and modification time, as
// docker cp writes them (no user or group names).
func fileHeader(fi fs.FileInfo, name, link string) *tarstream.Header {
	fm := fi.Mode()
	h := &tarstream.Header{Name: name, Linkname: link, Mode: int64(fm.Perm()), ModTime: fi.ModTime()}
	switch {
	case fm.IsRegular():
		h.Typeflag, h.Size = tarstream.TypeReg, fi.Size()
	case fi.IsDir():
		h.Typeflag = tarstream.TypeDir
		h.Name += "/"
	default:
		h.Typeflag = tarstream.TypeSymlink
	}
	for _, bit := range []struct {
		mode fs.FileMode
		tar  int64
	}{{fs.ModeSetuid, 0o4000}, {fs.ModeSetgid, 0o2000}, {fs.ModeSticky, 0o1000}} {
		if fm&bit.mode != 0 {
			h.Mode |= bit.tar
		}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		h.UID, h.GID = int(st.Uid), int(st.Gid)
	}
	return h
}

// entryTarget returns where a tar entry named name goes under dest: the
// name must be relative and stay under dest, and no directory between dest
// and the entry may be a symlink (an archive that plants a link and then
// writes through it is refused).
func entryTarget(dest, name string) (string, error) {
	trimmed := strings.TrimSuffix(name, "/")
	if trimmed == "" || path.IsAbs(name) {
		return "", filesErr(FilesExitInvalid, "archive entry %q: want a relative name", name)
	}
	for _, part := range strings.Split(trimmed, "/") {
		if part == ".." {
			return "", filesErr(FilesExitInvalid, "archive entry %q leaves the destination", name)
		}
	}
	clean := path.Clean("/" + trimmed)
	parts := strings.Split(strings.Trim(clean, "/"), "/")
	cur := dest
	for _, part := range parts[:max(len(parts)-1, 0)] {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break // created below by MkdirAll
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", filesErr(FilesExitInvalid, "archive entry %q goes through the symlink %s", name, cur)
		}
		if !fi.IsDir() {
			return "", filesErr(FilesExitInvalid, "archive entry %q: %s is not a directory", name, cur)
		}
	}
	return filepath.Join(dest, filepath.FromSlash(clean)), nil
}

// putTar extracts a tar stream into the existing directory dest. Regular
// files, directories and symlinks are written (as the sandbox's user);
// other entries are refused. The files' total size must not exceed limit.
//
// Nothing changes under dest unless the whole archive arrives: each file
// is staged, as it streams in, in a .sandboxctl-upload-* temporary file in
// the nearest directory of its target that exists already (so on the
// target's file system); directories and symlinks are only noted. Once the
// stream's end marker (two zero blocks) was read, every entry is checked
// again against the file system as it is then, and only then committed:
// directories made, files renamed into place, symlinks made. An archive
// that is cut short, malformed, over the limit or refused, or a tool
// ended by a signal, removes its temporary files and changes nothing.
func putTar(dest string, limit int64, r io.Reader, tmps *uploadTemps) (err error) {
	fi, err := os.Stat(dest)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return filesErr(FilesExitInvalid, "%s is not a directory", dest)
	}
	var plan uploadPlan
	defer func() {
		if err != nil {
			plan.discard(tmps)
		}
	}()
	cr := &countReader{r: r}
	tr := tarstream.NewReader(cr)
	var total, entryEnd int64
	buf := make([]byte, 1<<20)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// Go's reader also ends at a header boundary with no end
			// marker: an archive cut there is refused here.
			if cr.n < entryEnd+2*blockSize {
				return filesErr(FilesExitInvalid, "bad tar stream: it ended without its end marker (cut short?)")
			}
			break
		}
		if err != nil {
			return filesErr(FilesExitInvalid, "bad tar stream: %v", err)
		}
		dataStart := cr.n
		e := plannedEntry{name: hdr.Name, typ: hdr.Typeflag, mode: fs.FileMode(hdr.Mode) & fs.ModePerm, link: hdr.Linkname}
		switch e.typ {
		case tarstream.TypeDir, tarstream.TypeSymlink:
		case tarstream.TypeReg:
			if total += hdr.Size; total > limit {
				return filesErr(FilesExitTooLarge, "the archive holds more than the limit of %d bytes", limit)
			}
		default:
			return filesErr(FilesExitInvalid, "archive entry %q: type %q is not supported (files, directories and symlinks only)", hdr.Name, string(hdr.Typeflag))
		}
		target, err := plan.check(dest, e)
		if err != nil {
			return err
		}
		if e.typ == tarstream.TypeReg {
			if e.tmp, err = stageFile(dest, target, e.mode, tr, hdr.Size, buf, tmps); err != nil {
				return err
			}
		}
		plan.add(dest, e, target)
		entryEnd = dataStart + (hdr.Size+blockSize-1)/blockSize*blockSize
	}
	// The file system may have changed while the archive streamed in:
	// check every entry again before the first change.
	var again uploadPlan
	for _, e := range plan.entries {
		target, err := again.check(dest, e)
		if err != nil {
			return err
		}
		again.add(dest, e, target)
	}
	return plan.commit(dest, tmps)
}

// blockSize is a tar block.
const blockSize = tarstream.BlockSize

// countReader counts what is read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// plannedEntry is one entry of an upload, staged and not yet committed.
type plannedEntry struct {
	name string
	typ  byte
	mode fs.FileMode
	link string
	// tmp is the staged content of a regular file.
	tmp string
}

// uploadPlan is an upload's entries in archive order and what the
// archive itself makes of each path (so that an entry can not go through
// a symlink or a file planted earlier in the same archive).
type uploadPlan struct {
	entries []plannedEntry
	kinds   map[string]byte
}

// check returns where e goes under dest: entryTarget on the file system,
// and no directory on the way that an earlier entry makes a symlink or a
// file; a file or symlink may not replace a directory.
func (p *uploadPlan) check(dest string, e plannedEntry) (string, error) {
	target, err := entryTarget(dest, e.name)
	if err != nil {
		return "", err
	}
	rel, _ := filepath.Rel(dest, target)
	for dir := filepath.Dir(rel); dir != "." && dir != string(filepath.Separator); dir = filepath.Dir(dir) {
		switch p.kinds[dir] {
		case tarstream.TypeSymlink:
			return "", filesErr(FilesExitInvalid, "archive entry %q goes through the symlink %s", e.name, filepath.Join(dest, dir))
		case tarstream.TypeReg:
			return "", filesErr(FilesExitInvalid, "archive entry %q: %s is not a directory", e.name, filepath.Join(dest, dir))
		}
	}
	made, planned := p.kinds[rel]
	if e.typ == tarstream.TypeDir {
		if planned && made != tarstream.TypeDir {
			return "", filesErr(FilesExitInvalid, "archive entry %q: %s is not a directory", e.name, target)
		}
		if fi, err := os.Lstat(target); !planned && err == nil && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			return "", filesErr(FilesExitInvalid, "archive entry %q: %s is not a directory", e.name, target)
		}
	}
	if e.typ != tarstream.TypeDir {
		if (planned && made == tarstream.TypeDir) || (!planned && isDir(target)) || target == dest {
			return "", filesErr(FilesExitInvalid, "%s is a directory", target)
		}
	}
	return target, nil
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

func (p *uploadPlan) add(dest string, e plannedEntry, target string) {
	if p.kinds == nil {
		p.kinds = map[string]byte{}
	}
	rel, _ := filepath.Rel(dest, target)
	p.kinds[rel] = e.typ
	p.entries = append(p.entries, e)
}

// discard removes the staged files.
func (p *uploadPlan) discard(tmps *uploadTemps) {
	for _, e := range p.entries {
		if e.tmp != "" {
			_ = tmps.settle(e.tmp, "", false)
		}
	}
}

// commit applies the plan in archive order, checking each entry's way
// once more just before its change.
func (p *uploadPlan) commit(dest string, tmps *uploadTemps) error {
	for i, e := range p.entries {
		target, err := entryTarget(dest, e.name)
		if err == nil && e.typ != tarstream.TypeDir {
			err = os.MkdirAll(filepath.Dir(target), 0o755)
		}
		if err != nil {
			p.entries = p.entries[i:] // the rest is discarded
			return err
		}
		switch e.typ {
		case tarstream.TypeDir:
			if target != dest {
				err = os.MkdirAll(target, e.mode|0o700)
			}
		case tarstream.TypeReg:
			err = tmps.settle(e.tmp, target, true)
			p.entries[i].tmp = ""
		case tarstream.TypeSymlink:
			if old, lerr := os.Lstat(target); lerr == nil && !old.IsDir() {
				_ = os.Remove(target)
			}
			err = os.Symlink(e.link, target)
		}
		if err != nil {
			p.entries = p.entries[i+1:]
			return err
		}
	}
	return nil
}

// stageFile writes size bytes of r to a temporary file in the nearest
// existing directory of target (under dest), with its mode set, and
// returns its path.
func stageFile(dest, target string, mode fs.FileMode, r io.Reader, size int64, buf []byte, tmps *uploadTemps) (string, error) {
	dir := filepath.Dir(target)
	for dir != dest && !isDir(dir) {
		dir = filepath.Dir(dir)
	}
	f, err := tmps.createIn(dir)
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	// Large reads of the stdin pipe (1 MiB, see setPipeSize) and large
	// writes: os.File.ReadFrom would take 32 KiB at a time.
	n, err := io.CopyBuffer(writerOnly{f}, r, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = filesErr(FilesExitInvalid, "bad tar stream: %s was cut short after %d of %d bytes", target, n, size)
	}
	if err == nil && n != size {
		err = filesErr(FilesExitInvalid, "bad tar stream: %s ended after %d of %d bytes", target, n, size)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = tmps.settle(tmp, "", false)
		return "", err
	}
	return tmp, nil
}

// uploadTemps are the temporary files of the file tool's uploads in
// flight; a signal that ends the tool removes them (abandon) before it
// exits.
type uploadTemps struct {
	mu    sync.Mutex
	paths map[string]struct{}
	ended bool
}

// create makes a temporary file beside target and tracks it.
func (u *uploadTemps) create(target string) (*os.File, error) {
	return u.createIn(filepath.Dir(target))
}

// createIn makes a temporary file in dir and tracks it.
func (u *uploadTemps) createIn(dir string) (*os.File, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended {
		return nil, errors.New("files: ending")
	}
	f, err := os.CreateTemp(dir, ".sandboxctl-upload-*")
	if err != nil {
		return nil, err
	}
	u.paths[f.Name()] = struct{}{}
	return f, nil
}

// settle renames tmp to target (when rename) or removes it, and stops
// tracking it; it is atomic with abandon: a signal never lands between the
// rename and the bookkeeping.
func (u *uploadTemps) settle(tmp, target string, rename bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.paths, tmp)
	if u.ended {
		return errors.New("files: ending")
	}
	if rename {
		if err := os.Rename(tmp, target); err != nil {
			_ = os.Remove(tmp)
			return err
		}
		return nil
	}
	return os.Remove(tmp)
}

// abandon removes every tracked temporary file; no new one is made after.
// It keeps the lock: the process exits next.
func (u *uploadTemps) abandon() {
	u.mu.Lock()
	u.ended = true
	for p := range u.paths {
		_ = os.Remove(p)
	}
}

// writeAtomic writes r to a temporary file beside target and renames it
// into place: a symlink at target is replaced, never followed.
func writeAtomic(target string, mode fs.FileMode, r io.Reader, want int64, tmps *uploadTemps) error {
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
		return filesErr(FilesExitInvalid, "%s is a directory", target)
	}
	f, err := tmps.create(target)
	if err != nil {
		return err
	}
	tmp := f.Name()
	// Large reads of the stdin pipe (1 MiB, see setPipeSize) and large
	// writes: os.File.ReadFrom would take 32 KiB at a time.
	n, err := io.CopyBuffer(writerOnly{f}, r, make([]byte, 1<<20))
	if err == nil && want >= 0 && n != want {
		err = filesErr(FilesExitInvalid, "%s: the stream ended after %d of %d bytes", target, n, want)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if serr := tmps.settle(tmp, target, err == nil); err == nil {
		err = serr
	}
	return err
}

// writeFile writes stdin to p (a file; its directory must exist). An
// upload over limit bytes, or one ended by a signal, leaves p as it was.
func writeFile(p string, limit int64, mode fs.FileMode, r io.Reader, tmps *uploadTemps) error {
	return writeAtomic(p, mode, &overLimitReader{r: r, limit: limit}, -1, tmps)
}

// overLimitReader fails once more than left bytes were read through it.
type overLimitReader struct {
	r        io.Reader
	limit, n int64
}

func (o *overLimitReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if o.n += int64(n); o.n > o.limit {
		return 0, filesErr(FilesExitTooLarge, "the upload is larger than the limit of %d bytes", o.limit)
	}
	return n, err
}

func removePath(p string) error {
	if path.Clean(p) == "/" {
		return filesErr(FilesExitInvalid, "refusing to remove /")
	}
	if _, err := os.Lstat(p); err != nil {
		return err
	}
	return os.RemoveAll(p)
}

// ackReader counts what is read and writes the running total to w every
// FilesAckEvery bytes (the client's flow control for uploads).
type ackReader struct {
	r       io.Reader
	w       io.Writer
	n, sent int64
}

func (a *ackReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	a.n += int64(n)
	if a.n-a.sent >= FilesAckEvery {
		a.sent = a.n
		fmt.Fprintf(a.w, "%d\n", a.n)
	}
	return n, err
}

// writerOnly hides its Writer's ReadFrom, so that io.CopyBuffer uses the
// buffer it is given.
type writerOnly struct{ io.Writer }
