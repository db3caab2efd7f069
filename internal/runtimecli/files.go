package runtimecli

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// sandboxFiles serves the daemon's files API from the sandbox manager.
type sandboxFiles struct{ m *sandbox.Manager }

var _ daemon.FileStore = sandboxFiles{}

// sandboxPorts is the previews' daemon.PortDialer: the sandbox manager's
// relay to a port on a sandbox's loopback.
type sandboxPorts struct{ m *sandbox.Manager }

var _ daemon.PortDialer = sandboxPorts{}

func (s sandboxPorts) DialPort(ctx context.Context, agentID, sessionKey string, port int) (net.Conn, error) {
	return s.m.DialPort(ctx, sandbox.Scope{AgentID: agentID, SessionKey: sessionKey}, port)
}

func scopeOf(f api.FileRef) sandbox.Scope {
	return sandbox.Scope{AgentID: f.AgentID, SessionKey: f.SessionKey}
}

func (s sandboxFiles) Stat(ctx context.Context, f api.FileRef) (api.FileInfo, error) {
	return s.m.StatFile(ctx, scopeOf(f), f.Path)
}

func (s sandboxFiles) List(ctx context.Context, f api.FileRef) (api.FileList, error) {
	return s.m.ListFiles(ctx, scopeOf(f), f.Path)
}

func (s sandboxFiles) Read(ctx context.Context, f api.FileRef, limit int64, w io.Writer) error {
	return s.m.ReadFiles(ctx, scopeOf(f), f.Path, limit, w)
}

func (s sandboxFiles) WriteTar(ctx context.Context, f api.FileRef, limit int64, r io.Reader) error {
	return s.m.WriteFiles(ctx, scopeOf(f), f.Path, limit, r)
}

func (s sandboxFiles) WriteFile(ctx context.Context, f api.FileRef, mode fs.FileMode, limit int64, r io.Reader) error {
	return s.m.WriteFile(ctx, scopeOf(f), f.Path, mode, limit, r)
}

func (s sandboxFiles) Remove(ctx context.Context, f api.FileRef) error {
	return s.m.RemoveFile(ctx, scopeOf(f), f.Path)
}

// storeFiles gives the daemon's MCP endpoint the file tools.
type storeFiles struct {
	store daemon.FileStore
	limit int64
	audit daemon.FileAudit // nil: no audit log
}

var _ mcpserver.Files = storeFiles{}

func (s storeFiles) ReadFile(ctx context.Context, f api.FileRef, limit int64) (data []byte, err error) {
	if s.audit != nil {
		if err := s.audit.Check(); err != nil {
			return nil, err
		}
		defer func() { s.record(ctx, f, audit.DirectionOut, data, err) }()
	}
	var buf bytes.Buffer
	if err := s.store.Read(ctx, f, limit, &buf); err != nil {
		return nil, err
	}
	tr := tar.NewReader(&buf)
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("files: read %s: %w", f.Path, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%w: %s is not a regular file", cerrdefs.ErrInvalidArgument, f.Path)
	}
	return io.ReadAll(tr)
}

func (s storeFiles) WriteFile(ctx context.Context, f api.FileRef, data []byte) error {
	if s.audit == nil {
		return s.store.WriteFile(ctx, f, 0o644, s.limit, bytes.NewReader(data))
	}
	if err := s.audit.Check(); err != nil {
		return err
	}
	err := s.store.WriteFile(ctx, f, 0o644, s.limit, bytes.NewReader(data))
	s.record(ctx, f, audit.DirectionIn, data, err)
	return err
}

// record writes the file.transfer record of an MCP read_file or
// write_file (the files API records its own).
func (s storeFiles) record(ctx context.Context, f api.FileRef, direction string, data []byte, err error) {
	sum := sha256.Sum256(data)
	rec := &audit.File{Path: f.Path, Direction: direction, Format: "raw", Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	if err != nil {
		rec.Error = err.Error()
	}
	_ = s.audit.Record(ctx, audit.Record{Kind: audit.KindFileTransfer, AgentID: f.AgentID, SessionKey: f.SessionKey, Host: "sandbox", File: rec})
}

func (s storeFiles) ListFiles(ctx context.Context, f api.FileRef) (api.FileList, error) {
	return s.store.List(ctx, f)
}
