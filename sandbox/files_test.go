package sandbox

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

// fileManagers are the two ways the files API reaches a sandbox: its
// supervisor's file tool and, without a supervisor, the Engine archive API.
func fileManagers(t *testing.T) map[string]*Manager {
	return map[string]*Manager{
		"supervisor": newTestManager(t, nil),
		"engine":     newManagerOpts(t, func(o *Options) { o.DisableSupervisor = true }),
	}
}

// tarOf builds a tar stream from name/content pairs; a content starting
// with "->" is a symlink to the rest, a name ending in / a directory.
func tarOf(t *testing.T, entries ...string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i+1 < len(entries); i += 2 {
		name, body := entries[i], entries[i+1]
		hdr := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case strings.HasSuffix(name, "/"):
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case strings.HasPrefix(body, "->"):
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, body[2:], 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// untar returns name → content (symlinks as "->target", dirs as "/").
func untar(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("untar: %v", err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out[strings.TrimSuffix(hdr.Name, "/")] = "/"
		case tar.TypeSymlink:
			out[hdr.Name] = "->" + hdr.Linkname
		default:
			b, _ := io.ReadAll(tr)
			out[hdr.Name] = string(b)
		}
	}
}

func TestFilesRoundTrip(t *testing.T) {
	for name, m := range fileManagers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			s := Scope{AgentID: "files"}
			// Files go to a sandbox that exists: the files API never
			// makes one.
			if _, err := m.Ensure(ctx, s); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			// A single file, written and read back.
			if err := m.WriteFile(ctx, s, "/workspace/a.txt", 0o600, 1<<20, strings.NewReader("hello\n")); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			fi, err := m.StatFile(ctx, s, "/workspace/a.txt")
			if err != nil || fi.Type != "file" || fi.Size != 6 || fi.Mode != 0o600 {
				t.Fatalf("StatFile = %+v, %v", fi, err)
			}
			var buf bytes.Buffer
			if err := m.ReadFiles(ctx, s, "/workspace/a.txt", 1<<20, &buf); err != nil {
				t.Fatalf("ReadFiles: %v", err)
			}
			if got := untar(t, &buf); got["a.txt"] != "hello\n" || len(got) != 1 {
				t.Fatalf("read back %v", got)
			}
			// A directory tree, as tar, in and out.
			if err := m.WriteFiles(ctx, s, "/workspace", 1<<20, tarOf(t, "src/", "", "src/x.go", "package x\n", "src/sub/y", "yy", "src/link", "->x.go")); err != nil {
				t.Fatalf("WriteFiles: %v", err)
			}
			buf.Reset()
			if err := m.ReadFiles(ctx, s, "/workspace/src", 1<<20, &buf); err != nil {
				t.Fatalf("ReadFiles dir: %v", err)
			}
			got := untar(t, &buf)
			if got["src/x.go"] != "package x\n" || got["src/sub/y"] != "yy" || got["src/link"] != "->x.go" || got["src"] != "/" {
				t.Fatalf("dir read back %v", got)
			}
			l, err := m.ListFiles(ctx, s, "/workspace/src")
			if err != nil {
				t.Fatalf("ListFiles: %v", err)
			}
			var names []string
			for _, e := range l.Entries {
				names = append(names, e.Name+":"+e.Type)
			}
			if strings.Join(names, ",") != "link:symlink,sub:dir,x.go:file" {
				t.Fatalf("ListFiles = %v", names)
			}
			// Visible to commands, as the sandbox's user sees them.
			if out, _ := run(t, m, s, "cat /workspace/src/sub/y /workspace/a.txt"); out != "yyhello\n" {
				t.Fatalf("in the sandbox: %q", out)
			}
			if err := m.RemoveFile(ctx, s, "/workspace/src"); err != nil {
				t.Fatalf("RemoveFile: %v", err)
			}
			if _, err := m.StatFile(ctx, s, "/workspace/src"); !cerrdefs.IsNotFound(err) {
				t.Fatalf("stat after remove: %v", err)
			}
			// Clear errors, nothing changed.
			for _, c := range []struct {
				name string
				err  error
				is   func(error) bool
			}{
				{"relative path", m.WriteFile(ctx, s, "workspace/b", 0o644, 10, strings.NewReader("x")), cerrdefs.IsInvalidArgument},
				{"missing", m.ReadFiles(ctx, s, "/workspace/nope", 10, io.Discard), cerrdefs.IsNotFound},
				{"too large up", m.WriteFile(ctx, s, "/workspace/big", 0o644, 4, strings.NewReader("12345")), func(err error) bool { return errors.Is(err, ErrFileTooLarge) }},
				{"too large down", m.ReadFiles(ctx, s, "/workspace/a.txt", 3, io.Discard), func(err error) bool { return errors.Is(err, ErrFileTooLarge) }},
				{"dotdot entry", m.WriteFiles(ctx, s, "/workspace", 1<<20, tarOf(t, "../up", "x")), cerrdefs.IsInvalidArgument},
			} {
				if c.err == nil || !c.is(c.err) {
					t.Errorf("%s: err = %v", c.name, c.err)
				}
			}
			if _, err := m.StatFile(ctx, s, "/workspace/big"); !cerrdefs.IsNotFound(err) {
				t.Errorf("a refused upload left a file: %v", err)
			}
		})
	}
}

// TestFilesTmpfsAndLargeViaSupervisor: the supervisor sees the sandbox's
// tmpfs mounts (the Engine archive API does not), and a transfer larger
// than the supervisor's stdin queue and output window goes through whole.
func TestFilesTmpfsAndLargeViaSupervisor(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := ctxT(t)
	s := Scope{AgentID: "big"}
	if _, err := m.Ensure(ctx, s); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	data := make([]byte, 24<<20)
	_, _ = rand.Read(data)
	if err := m.WriteFile(ctx, s, "/tmp/big.bin", 0o644, 64<<20, bytes.NewReader(data)); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if out, _ := run(t, m, s, "wc -c < /tmp/big.bin"); strings.TrimSpace(out) != "25165824" {
		t.Fatalf("in the sandbox: %q", out)
	}
	var buf bytes.Buffer
	if err := m.ReadFiles(ctx, s, "/tmp/big.bin", 64<<20, &buf); err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	if got := untar(t, &buf)["big.bin"]; got != string(data) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), len(data))
	}
	// The file tool's sessions are not left behind.
	c, err := m.first().supervisorClient(ctx, mustEnsure(t, m, s).ID)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Meta[MetaFiles] != "" {
			t.Fatalf("file tool session left: %+v", in)
		}
	}
}

func mustEnsure(t *testing.T, m *Manager, s Scope) EnsureResult {
	t.Helper()
	res, err := m.Ensure(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSecurityFilesSymlinkEscape: a sandbox plants symlinks in its
// workspace (a bind mount of a host directory) to / and to a host
// directory holding a secret. Read, write, list, stat and remove through
// them must stay inside the sandbox's filesystem: the host secret is never
// read, removed or overwritten and nothing is created on the host.
func TestSecurityFilesSymlinkEscape(t *testing.T) {
	hostDir := t.TempDir()
	secret := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(secret, []byte("HOST-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, m := range fileManagers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			s := Scope{AgentID: "attacker"}
			out, code := run(t, m, s, "ln -s / /workspace/root && ln -s "+hostDir+" /workspace/hostdir && ln -s "+secret+" /workspace/secretlink && cat /etc/hostname")
			if code != 0 {
				t.Fatalf("plant links: %q", out)
			}
			sandboxHostname := out
			_, _, agentDir, _ := m.Layout(s)
			if target, err := os.Readlink(filepath.Join(agentDir, "hostdir")); err != nil || target != hostDir {
				t.Fatalf("the link is not in the host workspace dir: %q %v", target, err)
			}
			for _, p := range []string{"/workspace/hostdir/secret", "/workspace/root" + secret} {
				var buf bytes.Buffer
				err := m.ReadFiles(ctx, s, p, 1<<20, &buf)
				if strings.Contains(buf.String(), "HOST-SECRET") {
					t.Fatalf("read %s returned the host's secret", p)
				}
				if !cerrdefs.IsNotFound(err) {
					t.Fatalf("read %s: err = %v, want not found (got %q)", p, err, buf.String())
				}
			}
			// A link itself is archived as a link, as docker cp does.
			var link bytes.Buffer
			if err := m.ReadFiles(ctx, s, "/workspace/secretlink", 1<<20, &link); err != nil {
				t.Fatalf("read the link: %v", err)
			}
			if got := untar(t, &link); len(got) != 1 || got["secretlink"] != "->"+secret {
				t.Fatalf("read the link: %v", got)
			}
			if l, err := m.ListFiles(ctx, s, "/workspace/hostdir"); err == nil {
				t.Fatalf("list /workspace/hostdir listed the host dir: %+v", l)
			}
			// Through the link to /: the sandbox's own root, not the host's.
			var buf bytes.Buffer
			if err := m.ReadFiles(ctx, s, "/workspace/root/etc/hostname", 1<<20, &buf); err != nil {
				t.Fatalf("read via the / link: %v", err)
			}
			if got := untar(t, &buf)["hostname"]; got != sandboxHostname {
				t.Fatalf("/workspace/root/etc/hostname = %q, want the sandbox's %q", got, sandboxHostname)
			}
			_ = m.WriteFile(ctx, s, "/workspace/hostdir/pwned", 0o644, 1<<20, strings.NewReader("x"))
			_ = m.WriteFile(ctx, s, "/workspace/secretlink", 0o644, 1<<20, strings.NewReader("overwritten"))
			_ = m.WriteFile(ctx, s, "/workspace/root"+hostDir+"/pwned2", 0o644, 1<<20, strings.NewReader("x"))
			_ = m.WriteFiles(ctx, s, "/workspace", 1<<20, tarOf(t, "evil", "->"+hostDir, "evil/pwned3", "x"))
			_ = m.WriteFiles(ctx, s, "/workspace/hostdir", 1<<20, tarOf(t, "pwned4", "x"))
			_ = m.RemoveFile(ctx, s, "/workspace/hostdir/secret")
			entries, _ := os.ReadDir(hostDir)
			if len(entries) != 1 || entries[0].Name() != "secret" {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("the host dir changed: %v", names)
			}
			if b, _ := os.ReadFile(secret); string(b) != "HOST-SECRET" {
				t.Fatalf("host secret now %q", b)
			}
		})
	}
}
