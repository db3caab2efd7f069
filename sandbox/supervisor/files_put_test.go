package supervisor

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type putEntry struct {
	name, link string
	typ        byte
	body       string
}

func putArchive(t *testing.T, entries ...putEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Size: int64(len(e.body)), Mode: 0o640}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tree lists every path under dir with its type and content.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := rel + " " + d.Type().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFaultPutTarChangesNothingUnlessComplete runs the file tool's put on
// real directories: an archive cut short (inside a file, at an entry
// boundary, inside its end marker), over the limit, malformed, or that
// goes through a symlink it plants itself, changes nothing under the
// destination and leaves no .sandboxctl-upload-* file; a complete one is
// committed whole.
func TestFaultPutTarChangesNothingUnlessComplete(t *testing.T) {
	big := strings.Repeat("b", 3000)
	full := putArchive(t,
		putEntry{name: "old", typ: tar.TypeReg, body: "new"},
		putEntry{name: "sub/", typ: tar.TypeDir},
		putEntry{name: "sub/deep/f", typ: tar.TypeReg, body: big},
		putEntry{name: "ln", typ: tar.TypeSymlink, link: "sub"},
	)
	// The symlink's header: an entry boundary.
	boundary := len(full) - 2*blockSize - blockSize // the symlink's header
	for _, tc := range []struct {
		name    string
		archive []byte
		limit   int64
		code    int
	}{
		{"cut inside a file", full[:3*blockSize+1000], 1 << 20, FilesExitInvalid},
		{"cut at an entry boundary", full[:boundary], 1 << 20, FilesExitInvalid},
		{"cut after the last entry", full[:len(full)-2*blockSize], 1 << 20, FilesExitInvalid},
		{"cut inside the end marker", full[:len(full)-blockSize], 1 << 20, FilesExitInvalid},
		{"over the limit", full, 3000, FilesExitTooLarge},
		{"malformed", append(slices.Clone(full[:boundary]), bytes.Repeat([]byte{'z'}, 2*blockSize)...), 1 << 20, FilesExitInvalid},
		{"through its own symlink", putArchive(t,
			putEntry{name: "old", typ: tar.TypeReg, body: "new"},
			putEntry{name: "esc", typ: tar.TypeSymlink, link: "/"},
			putEntry{name: "esc/etc/x", typ: tar.TypeReg, body: "x"},
		), 1 << 20, FilesExitInvalid},
		{"file over its own file", putArchive(t,
			putEntry{name: "old", typ: tar.TypeReg, body: "new"},
			putEntry{name: "f", typ: tar.TypeReg, body: "x"},
			putEntry{name: "f/g", typ: tar.TypeReg, body: "x"},
		), 1 << 20, FilesExitInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := t.TempDir()
			if err := os.WriteFile(filepath.Join(dest, "old"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := tree(t, dest)
			var out, errb bytes.Buffer
			code := RunFiles([]string{"put", strconv.FormatInt(tc.limit, 10), dest}, bytes.NewReader(tc.archive), &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d (%s), want %d", code, errb.String(), tc.code)
			}
			if after := tree(t, dest); !slices.Equal(after, before) {
				t.Errorf("the destination changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}

	dest := t.TempDir()
	if err := os.WriteFile(filepath.Join(dest, "old"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	if code := RunFiles([]string{"put", "1048576", dest}, bytes.NewReader(full), io.Discard, &errb); code != FilesExitOK {
		t.Fatalf("complete archive: exit %d %s", code, errb.String())
	}
	want := []string{". d---------", "ln L---------", "old ---------- new", "sub d---------", "sub/deep d---------", "sub/deep/f ---------- " + big}
	if got := tree(t, dest); !slices.Equal(got, want) {
		t.Fatalf("committed tree %q, want %q", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dest, "sub/deep/f")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("committed file mode: %v %v", fi, err)
	}
}

// TestFaultWriteOverLimitKeepsTheFile: a raw write over its limit leaves
// an existing file as it was and no temporary file.
func TestFaultWriteOverLimitKeepsTheFile(t *testing.T) {
	dest := t.TempDir()
	p := filepath.Join(dest, "old")
	if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dest)
	var errb bytes.Buffer
	if code := RunFiles([]string{"write", "10", "420", p}, strings.NewReader(strings.Repeat("y", 11)), io.Discard, &errb); code != FilesExitTooLarge {
		t.Fatalf("exit %d %s, want %d", code, errb.String(), FilesExitTooLarge)
	}
	if after := tree(t, dest); !slices.Equal(after, before) {
		t.Fatalf("changed:\nbefore %q\nafter  %q", before, after)
	}
}
