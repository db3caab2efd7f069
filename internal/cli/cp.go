package cli

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// CpOptions are the flags of `sandboxctl cp`.
type CpOptions struct {
	SessionKey string
	// Progress forces the progress line on stderr (default: only when
	// stderr is a terminal).
	Progress bool
}

func newCpCommand(c *CLI) *cobra.Command {
	var opts CpOptions
	cmd := &cobra.Command{
		Use:   "cp SRC DEST",
		Short: "Copy files between this machine and an agent's sandbox (docker cp syntax)",
		Long: `Copy files or directories into or out of an agent's sandbox, as docker cp does:

  sandboxctl cp ./src a1:/workspace/src       upload (into it when it is a directory)
  sandboxctl cp a1:/workspace/out.txt .       download
  sandboxctl cp a1:/workspace/out.txt -       write a tar stream to stdout
  tar c dir | sandboxctl cp - a1:/workspace   extract a tar stream from stdin

AGENT:PATH names an absolute PATH inside the agent's sandbox; it is resolved
there (a symlink never leads out of the sandbox). A local path holding a colon
is written ./a:b. The daemon bounds the size of one transfer
(serve --files-max-bytes). Progress goes to stderr when it is a terminal, or
with --progress.`,
		Args: ExactArgs(2, "SRC", "DEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunCp(cmd.Context(), c, opts, args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&opts.SessionKey, "session", "", "the session key of a session-scoped sandbox")
	cmd.Flags().BoolVar(&opts.Progress, "progress", false, "show progress on stderr even when it is not a terminal")
	return cmd
}

// cpTarget is one side of `cp`: a sandbox path (Agent set), a local path,
// or "-" (a tar stream on stdin or stdout).
type cpTarget struct {
	Agent, Path string
	Stream      bool
}

// parseCpTarget splits AGENT:PATH as docker cp does: a leading / or . is
// always local.
func parseCpTarget(arg string) (cpTarget, error) {
	if arg == "-" {
		return cpTarget{Stream: true}, nil
	}
	if arg == "" {
		return cpTarget{}, UsageErrorf("cp: empty path")
	}
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return cpTarget{Path: arg}, nil
	}
	agent, p, ok := strings.Cut(arg, ":")
	if !ok || strings.Contains(agent, "/") {
		return cpTarget{Path: arg}, nil
	}
	if agent == "" {
		return cpTarget{}, UsageErrorf("cp: %q: the agent id before ':' is empty", arg)
	}
	if !path.IsAbs(p) {
		return cpTarget{}, UsageErrorf("cp: %q: the path inside the sandbox must be absolute (e.g. %s:/workspace/file)", arg, agent)
	}
	return cpTarget{Agent: agent, Path: p}, nil
}

// RunCp copies src to dst; exactly one of them is in a sandbox.
func RunCp(ctx context.Context, c *CLI, opts CpOptions, src, dst string) error {
	s, err := parseCpTarget(src)
	if err != nil {
		return err
	}
	d, err := parseCpTarget(dst)
	if err != nil {
		return err
	}
	if (s.Agent == "") == (d.Agent == "") {
		return UsageErrorf("cp: exactly one of SRC and DEST must be AGENT:PATH (got %q and %q)", src, dst)
	}
	client, err := c.DaemonClient()
	if err != nil {
		return err
	}
	prog := newProgress(c.Err, opts.Progress)
	if d.Agent != "" {
		return cpUpload(ctx, c, client, prog, s, api.FileRef{AgentID: d.Agent, SessionKey: opts.SessionKey, Path: d.Path})
	}
	return cpDownload(ctx, c, client, prog, api.FileRef{AgentID: s.Agent, SessionKey: opts.SessionKey, Path: s.Path}, d)
}

func cpUpload(ctx context.Context, c *CLI, client *apiclient.Client, prog *progress, src cpTarget, dst api.FileRef) error {
	if src.Stream {
		// A tar stream from stdin goes into DEST, a directory. Its length
		// is known only at its end: it is spooled first.
		return cpUploadStdin(ctx, c, client, prog, dst)
	}
	into := dst
	fi, err := os.Lstat(src.Path)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	name := filepath.Base(src.Path)
	st, err := client.StatFile(ctx, dst)
	switch {
	case err == nil && st.Type == "dir":
		// Into the existing directory.
	case err == nil && fi.IsDir():
		return fmt.Errorf("cp: cannot copy directory %s onto the file %s", src.Path, dst.Path)
	case err == nil || errors.Is(err, cerrdefs.ErrNotFound):
		// DEST names the copy: write it into its parent.
		name, into.Path = path.Base(dst.Path), path.Dir(dst.Path)
	default:
		return fmt.Errorf("cp: %w", err)
	}
	// The tar is planned first (its entries and its exact length), then
	// streamed as it is written: no copy of the files on the local disk.
	lt, err := planLocalTar(src.Path, name)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		err := lt.writeTo(pw)
		pw.CloseWithError(err)
		wrote <- err
	}()
	err = client.UploadTar(ctx, into, prog.reader(pr, src.Path, lt.size), lt.size)
	prog.done()
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the upload stopped early
	if werr := <-wrote; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return fmt.Errorf("cp: %s: %w", src.Path, werr)
	}
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	return nil
}

// cpUploadStdin uploads the tar stream on stdin into the directory dst.
func cpUploadStdin(ctx context.Context, c *CLI, client *apiclient.Client, prog *progress, dst api.FileRef) error {
	spool, err := os.CreateTemp("", "sandboxctl-cp-*.tar")
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	n, err := io.Copy(spool, c.In)
	if err != nil {
		return fmt.Errorf("cp: read stdin: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	err = client.UploadTar(ctx, dst, prog.reader(spool, "stdin", n), n)
	prog.done()
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	return nil
}

func cpDownload(ctx context.Context, c *CLI, client *apiclient.Client, prog *progress, src api.FileRef, dst cpTarget) error {
	rc, err := client.DownloadTar(ctx, src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer rc.Close()
	r := prog.reader(rc, src.AgentID+":"+src.Path, -1)
	defer prog.done()
	if dst.Stream {
		if err := copyCheckedTar(c.Out, r); err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		return nil
	}
	dir, rename := dst.Path, ""
	if fi, err := os.Stat(dst.Path); err != nil || !fi.IsDir() {
		// DEST names the copy.
		dir, rename = filepath.Dir(dst.Path), filepath.Base(dst.Path)
	}
	if err := extractLocalTar(r, dir, rename); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	return nil
}

// localTar is the tar of a local path, planned before it is written:
// its entries (their headers fixed when planned) and its exact length.
type localTar struct {
	entries []localTarEntry
	size    int64
}

type localTarEntry struct {
	hdr  *tar.Header
	path string // a regular file's content; "" for other entries
}

// tarChunk is the size of one read of a file into the tar and of one
// write of the tar.
const tarChunk = 256 << 10

// planLocalTar plans the archive of the local path src (its symlinks as
// symlinks) with its top entry named name. Its length is measured by
// writing it with tar.Writer, the file contents skipped.
func planLocalTar(src, name string) (*localTar, error) {
	lt := &localTar{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
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
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // devices, sockets, fifos
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		hdr.Name = path.Join(name, filepath.ToSlash(rel))
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if fi.IsDir() {
			hdr.Name += "/"
		}
		e := localTarEntry{hdr: hdr}
		if fi.Mode().IsRegular() {
			e.path = p
		}
		lt.entries = append(lt.entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var cw countingWriter
	if err := lt.write(&cw, func(e localTarEntry) (io.Reader, func(), error) { return unreadBytes{}, func() {}, nil }); err != nil {
		return nil, err
	}
	lt.size = cw.n
	return lt, nil
}

// writeTo writes the planned archive to w, each file's content read now:
// a file that shrank since it was planned is an error; of one that grew,
// what it held when planned goes.
func (lt *localTar) writeTo(w io.Writer) error {
	return lt.write(w, func(e localTarEntry) (io.Reader, func(), error) {
		f, err := os.Open(e.path)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { _ = f.Close() }, nil
	})
}

// write writes the archive with each regular file's content from open.
func (lt *localTar) write(w io.Writer, open func(localTarEntry) (io.Reader, func(), error)) error {
	tw := tar.NewWriter(w)
	buf := make([]byte, tarChunk)
	for _, e := range lt.entries {
		if err := tw.WriteHeader(e.hdr); err != nil {
			return err
		}
		if e.path == "" {
			continue
		}
		r, closeFn, err := open(e)
		if err != nil {
			return err
		}
		n, err := io.CopyBuffer(tw, io.LimitReader(r, e.hdr.Size), buf)
		closeFn()
		if err == nil && n < e.hdr.Size {
			err = fmt.Errorf("%s: %d bytes, %d when the copy began: %w", e.path, n, e.hdr.Size, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// countingWriter counts the bytes written to it and keeps none.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// unreadBytes stands for file content whose bytes do not matter (only its
// length does): a Read fills nothing.
type unreadBytes struct{}

func (unreadBytes) Read(p []byte) (int, error) { return len(p), nil }

// extractLocalTar extracts a tar stream from the daemon into dir, its top
// entry renamed to rename when set. No entry may leave dir or write
// through a symlink.
func extractLocalTar(r io.Reader, dir, rename string) error {
	tr := newCheckedTar(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the archive: %w", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		parts := strings.Split(name, "/")
		if name == "" || path.IsAbs(hdr.Name) || containsDotDot(parts) {
			return fmt.Errorf("archive entry %q leaves the destination", hdr.Name)
		}
		if rename != "" {
			parts[0] = rename
		}
		target := dir
		for i, part := range parts {
			target = filepath.Join(target, part)
			if i == len(parts)-1 {
				break
			}
			if fi, err := os.Lstat(target); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return fmt.Errorf("archive entry %q goes through the symlink %s", hdr.Name, target)
			}
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if fi, err := os.Lstat(target); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				_ = os.Remove(target) // replace a link, never write through it
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		default:
			return fmt.Errorf("archive entry %q: type %q is not supported", hdr.Name, string(hdr.Typeflag))
		}
	}
}

func containsDotDot(parts []string) bool {
	for _, p := range parts {
		if p == ".." {
			return true
		}
	}
	return false
}

// progress prints "LABEL: N MiB [of M MiB]" on one line of stderr, at most
// five times a second, when enabled.
type progress struct {
	w        io.Writer
	on       bool
	label    string
	total, n int64
	last     time.Time
}

func newProgress(w io.Writer, force bool) *progress {
	on := force
	if f, ok := w.(*os.File); ok && !on {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		on = err == nil
	}
	return &progress{w: w, on: on}
}

func (p *progress) reader(r io.Reader, label string, total int64) io.Reader {
	if !p.on {
		return r
	}
	p.label, p.total = label, total
	return &progressReader{r: r, p: p}
}

func (p *progress) add(n int) {
	p.n += int64(n)
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
		p.last = now
		p.print()
	}
}

func (p *progress) print() {
	const mib = 1 << 20
	if p.total >= 0 {
		fmt.Fprintf(p.w, "\r%s: %.1f of %.1f MiB", p.label, float64(p.n)/mib, float64(p.total)/mib)
	} else {
		fmt.Fprintf(p.w, "\r%s: %.1f MiB", p.label, float64(p.n)/mib)
	}
}

func (p *progress) done() {
	if p.on && p.label != "" {
		p.print()
		fmt.Fprintln(p.w)
		p.label = ""
	}
}

type progressReader struct {
	r io.Reader
	p *progress
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.p.add(n)
	return n, err
}
