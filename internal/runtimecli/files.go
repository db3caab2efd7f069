package runtimecli

import (
	"context"
	"io"
	"io/fs"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// sandboxFiles serves the daemon's files API from the sandbox manager.
type sandboxFiles struct{ m *sandbox.Manager }

var _ daemon.FileStore = sandboxFiles{}

func scopeOf(f daemon.FileRef) sandbox.Scope {
	return sandbox.Scope{AgentID: f.AgentID, SessionKey: f.SessionKey}
}

func (s sandboxFiles) Stat(ctx context.Context, f daemon.FileRef) (apiclient.FileInfo, error) {
	fi, err := s.m.StatFile(ctx, scopeOf(f), f.Path)
	return apiclient.FileInfo(fi), err
}

func (s sandboxFiles) List(ctx context.Context, f daemon.FileRef) (apiclient.FileList, error) {
	l, err := s.m.ListFiles(ctx, scopeOf(f), f.Path)
	out := apiclient.FileList{Path: l.Path, Truncated: l.Truncated, Entries: make([]apiclient.FileInfo, len(l.Entries))}
	for i, e := range l.Entries {
		out.Entries[i] = apiclient.FileInfo(e)
	}
	return out, err
}

func (s sandboxFiles) Read(ctx context.Context, f daemon.FileRef, limit int64, w io.Writer) error {
	return s.m.ReadFiles(ctx, scopeOf(f), f.Path, limit, w)
}

func (s sandboxFiles) WriteTar(ctx context.Context, f daemon.FileRef, limit int64, r io.Reader) error {
	return s.m.WriteFiles(ctx, scopeOf(f), f.Path, limit, r)
}

func (s sandboxFiles) WriteFile(ctx context.Context, f daemon.FileRef, mode fs.FileMode, limit int64, r io.Reader) error {
	return s.m.WriteFile(ctx, scopeOf(f), f.Path, mode, limit, r)
}

func (s sandboxFiles) Remove(ctx context.Context, f daemon.FileRef) error {
	return s.m.RemoveFile(ctx, scopeOf(f), f.Path)
}
