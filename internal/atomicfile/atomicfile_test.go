package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{"Write": Write, "WriteVolatile": WriteVolatile} {
		t.Run(name, func(t *testing.T) { testWrite(t, write) })
	}
}

func testWrite(t *testing.T, write func(string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, content := range []string{"one", "two, longer"} {
		if err := write(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("read %q %v, want %q", b, err, content)
		}
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left: %v", entries)
	}
	if err := write(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

// TestWriteUmaskAndFailure: the mode is perm whatever the umask, and a
// failed rename (the target is a non-empty directory) leaves no temporary
// file and the target as it was.
func TestWriteUmaskAndFailure(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v %v, want 0644 under umask 077", fi.Mode(), err)
	}
	target := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("y"), 0o600); err == nil || !strings.Contains(err.Error(), "write "+target) {
		t.Fatalf("writing over a non-empty directory: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left behind: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(target, "inside")); err != nil {
		t.Fatalf("the directory was changed: %v", err)
	}
}
