package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// Account names a sandbox identity has inside its container.
const (
	IdentityUserName       = "sandbox"
	IdentitySupervisorName = "sandboxctl-supervisor"
)

// identityAccounts are the /etc/passwd and /etc/group a container of a
// sandbox identity sees (read-only binds): the image's own, without any
// entry of the identity's ids, plus IdentityUserName for the command uid
// (home HomeDir) and IdentitySupervisorName for the supervisor's, so
// `id -un`, `whoami` and the tools that look their user up work.
type identityAccounts struct {
	Passwd, Group string // host paths
}

// imageAccounts caches, per image, its /etc/passwd and /etc/group.
type imageAccounts struct {
	mu sync.Mutex
	m  map[string][2][]byte
}

// accountsOf reads image's /etc/passwd and /etc/group from a container
// created (never started) for that and removed at once; a file the image
// lacks is empty.
func (m *DockerEngine) accountsOf(ctx context.Context, image string) ([2][]byte, error) {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	if got, ok := m.accounts.m[image]; ok {
		return got, nil
	}
	labels := map[string]string{LabelManaged: "0"}
	for k, v := range m.labels {
		labels[k] = v
	}
	created, err := m.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"/nonexistent"}, Labels: labels, NetworkDisabled: true},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		if isNotFound(err) {
			return [2][]byte{}, fmt.Errorf("read the accounts of %s: %w", image, &imageMissingError{image: image, err: err})
		}
		return [2][]byte{}, m.classify("read the accounts of "+image, err)
	}
	defer func() {
		_, _ = m.cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
	}()
	var out [2][]byte
	for i, p := range []string{"/etc/passwd", "/etc/group"} {
		res, err := m.cli.CopyFromContainer(ctx, created.ID, client.CopyFromContainerOptions{SourcePath: p})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return out, m.classify("read "+p+" of "+image, err)
		}
		tr := tar.NewReader(res.Content)
		hdr, err := tr.Next()
		if err == nil && hdr.Typeflag == tar.TypeReg {
			out[i], err = io.ReadAll(io.LimitReader(tr, 4<<20))
		}
		_ = res.Content.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("read %s of %s: %w", p, image, err)
		}
	}
	if m.accounts.m == nil {
		m.accounts.m = map[string][2][]byte{}
	}
	m.accounts.m[image] = out
	return out, nil
}

// withIdentity returns db (passwd or group lines) without entries of id's
// uids or names, plus the identity's entries.
func withIdentity(db []byte, id supervisor.Identity, passwd bool) []byte {
	var b strings.Builder
	ours := map[string]bool{fmt.Sprint(id.Command): true, fmt.Sprint(id.Supervisor): true}
	for _, line := range strings.Split(string(db), "\n") {
		f := strings.Split(line, ":")
		if line == "" || (len(f) >= 3 && (ours[f[2]] || f[0] == IdentityUserName || f[0] == IdentitySupervisorName)) {
			continue
		}
		b.WriteString(line + "\n")
	}
	if passwd {
		fmt.Fprintf(&b, "%s:x:%d:%d:sandbox:%s:/bin/sh\n", IdentityUserName, id.Command, id.Command, HomeDir)
		fmt.Fprintf(&b, "%s:x:%d:%d:sandboxctl supervisor:/nonexistent:/usr/sbin/nologin\n", IdentitySupervisorName, id.Supervisor, id.Supervisor)
	} else {
		fmt.Fprintf(&b, "%s:x:%d:\n", IdentityUserName, id.Command)
		fmt.Fprintf(&b, "%s:x:%d:\n", IdentitySupervisorName, id.Supervisor)
	}
	return []byte(b.String())
}

// writeAccounts writes the account files of sandbox name under the state
// directory (0644 files in a root-only directory; the container reads
// them through its binds).
func (m *DockerEngine) writeAccounts(ctx context.Context, image, name string, id supervisor.Identity) (*identityAccounts, error) {
	base, err := m.accountsOf(ctx, image)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.stateDir, "sandboxes", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox %s: accounts: %w", name, err)
	}
	acc := &identityAccounts{Passwd: filepath.Join(dir, "passwd"), Group: filepath.Join(dir, "group")}
	for _, f := range []struct {
		path string
		data []byte
	}{{acc.Passwd, withIdentity(base[0], id, true)}, {acc.Group, withIdentity(base[1], id, false)}} {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			return nil, fmt.Errorf("sandbox %s: accounts: %w", name, err)
		}
		if err := os.Chmod(f.path, 0o644); err != nil {
			return nil, fmt.Errorf("sandbox %s: accounts: %w", name, err)
		}
	}
	return acc, nil
}
