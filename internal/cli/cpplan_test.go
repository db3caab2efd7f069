package cli

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
)

// TestLocalTarPlanIsItsLength: the planned length of a local tree's tar
// (files of odd sizes, an empty file, a directory, a symlink, a name long
// enough for a PAX header) is the length of the archive written, which
// holds every entry with its content.
func TestLocalTarPlanIsItsLength(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	long := strings.Repeat("n", 150)
	files := map[string]int{"a": 1, "sub/b": 513, filepath.Join("sub", long): 100000, "empty": 0}
	for name, n := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		_, _ = rand.Read(data)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	lt, err := planLocalTar(src, "top")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := lt.writeTo(&out); err != nil {
		t.Fatal(err)
	}
	if int64(out.Len()) != lt.size {
		t.Fatalf("planned %d bytes, wrote %d", lt.size, out.Len())
	}
	got := map[string]int{}
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, tr)
		got[hdr.Name] = int(n)
	}
	for name, n := range files {
		if m, ok := got["top/"+filepath.ToSlash(name)]; !ok || m != n {
			t.Errorf("entry %s: %d bytes (present %v), want %d", name, m, ok, n)
		}
	}
	if _, ok := got["top/link"]; !ok {
		t.Errorf("no symlink entry in %v", got)
	}
}

// TestFaultLocalTarFileShrank: a file that shrank between the plan and
// the write is an error (the upload fails), never a short archive sent as
// whole.
func TestFaultLocalTarFileShrank(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	lt, err := planLocalTar(p, "f")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if err := lt.writeTo(io.Discard); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("write after the file shrank: %v, want io.ErrUnexpectedEOF", err)
	}
}
