package sandboxctl

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// ErrNotRegularFile is returned when a copied-out path is not a regular
// file.
var ErrNotRegularFile = errors.New("sandboxctl: not a regular file")

// copyTo writes one file through the Engine's archive API (or to this
// machine's file system).
func (ft FileTarget) copyTo(ctx context.Context, content []byte, dst string, mode int64) error {
	if !path.IsAbs(dst) || path.Clean(dst) != dst || dst == "/" {
		return fmt.Errorf("%w: copy to %q: want a clean absolute file path", ErrInvalidOption, dst)
	}
	if mode&^0o7777 != 0 {
		return fmt.Errorf("%w: copy to %s: mode %o is not a permission mode", ErrInvalidOption, dst, mode)
	}
	if ft.Container == "" {
		return os.WriteFile(filepath.FromSlash(dst), content, os.FileMode(mode))
	}
	// The file belongs to the container's user (the sandbox's unprivileged
	// user), as if a command had written it.
	insp, err := ft.Engine.ContainerInspect(ctx, ft.Container, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("sandboxctl: copy to %s: %w", dst, err)
	}
	hdr := &tar.Header{Name: path.Base(dst), Mode: mode, Size: int64(len(content)), ModTime: time.Now(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	byName := false
	if id, ok := identityOf(insp.Container.Config); ok {
		// A sandbox identity (the container starts as root, its commands
		// run as the identity's command uid and gid).
		hdr.Uid, hdr.Gid = int(id.Command), int(id.Command)
	} else if insp.Container.Config != nil && insp.Container.Config.User != "" {
		u, g, _ := strings.Cut(insp.Container.Config.User, ":")
		uid, uerr := strconv.Atoi(u)
		gid, gerr := strconv.Atoi(g)
		if g == "" {
			gid, gerr = uid, uerr
		}
		if uerr == nil && gerr == nil {
			hdr.Uid, hdr.Gid = uid, gid
		} else {
			byName = true // a user name: the Engine resolves it in the container
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(content); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := ft.Engine.CopyToContainer(ctx, ft.Container, client.CopyToContainerOptions{
		DestinationPath: path.Dir(dst), Content: &buf, CopyUIDGID: byName}); err != nil {
		return fmt.Errorf("sandboxctl: copy to %s: %w", dst, err)
	}
	return nil
}

// identityOf reads the sandbox identity of a container from its label
// (sandbox.LabelIdentity, "COMMAND_UID:SUPERVISOR_UID").
func identityOf(cfg *container.Config) (supervisor.Identity, bool) {
	if cfg == nil || cfg.Labels["sandboxctl.identity"] == "" {
		return supervisor.Identity{}, false
	}
	id, err := supervisor.ParseIdentity(cfg.Labels["sandboxctl.identity"])
	return id, err == nil
}

// copyFrom reads one regular file through the Engine's archive API (or
// from this machine's file system).
func (ft FileTarget) copyFrom(ctx context.Context, src string) (io.ReadCloser, error) {
	if !path.IsAbs(src) {
		return nil, fmt.Errorf("%w: copy from %q: want an absolute path", ErrInvalidOption, src)
	}
	if ft.Container == "" {
		f, err := os.Open(filepath.FromSlash(src))
		if err != nil {
			return nil, err
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			_ = f.Close()
			return nil, fmt.Errorf("%w: %s", ErrNotRegularFile, src)
		}
		return f, nil
	}
	res, err := ft.Engine.CopyFromContainer(ctx, ft.Container, client.CopyFromContainerOptions{SourcePath: src})
	if err != nil {
		return nil, fmt.Errorf("sandboxctl: copy from %s: %w", src, err)
	}
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err != nil {
		_ = res.Content.Close()
		return nil, fmt.Errorf("sandboxctl: copy from %s: read archive: %w", src, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		_ = res.Content.Close()
		return nil, fmt.Errorf("%w: %s", ErrNotRegularFile, src)
	}
	return struct {
		io.Reader
		io.Closer
	}{tr, res.Content}, nil
}
