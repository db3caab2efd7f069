package tarstream_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor/tarstream"
)

// entry is one archive entry of the tests: a header and its data.
type entry struct {
	name, link string
	typ        byte
	mode       int64
	uid, gid   int
	mtime      time.Time
	data       string
}

var (
	long255 = strings.Repeat("d/", 60) + strings.Repeat("f", 120) // 240 bytes, no ustar split fits the last part
	mtime   = time.Unix(1700000000, 0)
	entries = []entry{
		{name: "top/", typ: tar.TypeDir, mode: 0o755, uid: 1000, gid: 1000, mtime: mtime},
		{name: "top/a.txt", typ: tar.TypeReg, mode: 0o644, uid: 1000, gid: 1000, mtime: mtime, data: "hello\n"},
		{name: "top/empty", typ: tar.TypeReg, mode: 0o600, mtime: mtime},
		{name: "top/block", typ: tar.TypeReg, mode: 0o4755, mtime: mtime, data: strings.Repeat("x", 512)},
		{name: "top/odd", typ: tar.TypeReg, mode: 0o644, mtime: mtime, data: strings.Repeat("y", 1025)},
		{name: "top/link", link: "a.txt", typ: tar.TypeSymlink, mode: 0o777, mtime: mtime},
		{name: "top/" + long255, typ: tar.TypeReg, mode: 0o644, mtime: mtime, data: "long name"},
		{name: "top/longlink", link: "/" + long255, typ: tar.TypeSymlink, mode: 0o777, mtime: mtime},
		{name: "top/héllo wörld €", typ: tar.TypeReg, mode: 0o644, mtime: mtime, data: "utf-8"},
		{name: "top/bigid", typ: tar.TypeReg, mode: 0o644, uid: 3000000, gid: 4000000, mtime: mtime, data: "ids"},
	}
)

func (e entry) stdHeader(format tar.Format) *tar.Header {
	return &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
		ModTime: e.mtime, Size: int64(len(e.data)), Format: format}
}

// TestReadsWhatArchiveTarWrites: every format archive/tar writes (ustar,
// PAX, GNU: long names, non-ASCII names, large ids) reads back entry for
// entry, byte for byte.
func TestReadsWhatArchiveTarWrites(t *testing.T) {
	for _, format := range []tar.Format{tar.FormatUnknown, tar.FormatPAX, tar.FormatGNU, tar.FormatUSTAR} {
		t.Run(format.String(), func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			var want []entry
			for _, e := range entries {
				if err := tw.WriteHeader(e.stdHeader(format)); err != nil {
					if format == tar.FormatUSTAR {
						continue // what ustar cannot hold
					}
					t.Fatalf("archive/tar: %s: %v", e.name, err)
				}
				if _, err := io.WriteString(tw, e.data); err != nil {
					t.Fatal(err)
				}
				want = append(want, e)
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			if format == tar.FormatUSTAR && len(want) < 5 {
				t.Fatalf("only %d entries in ustar", len(want))
			}
			checkRead(t, buf.Bytes(), want)
		})
	}
}

func checkRead(t *testing.T, archive []byte, want []entry) {
	t.Helper()
	tr := tarstream.NewReader(bytes.NewReader(archive))
	for _, e := range want {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("Next (want %s): %v", e.name, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: read: %v", e.name, err)
		}
		if h.Name != e.name || h.Linkname != e.link || h.Typeflag != e.typ || h.Mode != e.mode || h.UID != e.uid ||
			h.GID != e.gid || !h.ModTime.Equal(e.mtime) || h.Size != int64(len(e.data)) || string(data) != e.data {
			t.Errorf("got %+v %q, want %+v", *h, data, e)
		}
	}
	if h, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last entry: %+v, %v; want io.EOF", h, err)
	}
}

// TestArchiveTarReadsWhatItWrites: archive/tar reads this package's
// output entry for entry, byte for byte, with its end marker.
func TestArchiveTarReadsWhatItWrites(t *testing.T) {
	var buf bytes.Buffer
	tw := tarstream.NewWriter(&buf)
	for _, e := range entries {
		h := &tarstream.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, UID: e.uid, GID: e.gid,
			ModTime: e.mtime, Size: int64(len(e.data))}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%tarstream.BlockSize != 0 || !bytes.Equal(buf.Bytes()[buf.Len()-1024:], make([]byte, 1024)) {
		t.Fatalf("the stream (%d bytes) does not end with two zero blocks", buf.Len())
	}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for _, e := range entries {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("archive/tar Next (want %s): %v", e.name, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != e.name || h.Linkname != e.link || h.Typeflag != e.typ || h.Mode != e.mode || h.Uid != e.uid ||
			h.Gid != e.gid || !h.ModTime.Equal(e.mtime) || string(data) != e.data {
			t.Errorf("archive/tar read %+v %q, want %+v", *h, data, e)
		}
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("archive/tar after the last entry: %v", err)
	}
	// And this package reads its own output.
	checkRead(t, buf.Bytes(), entries)
}

// TestWriterRefusesAWrongSize: an entry's data must be exactly its size.
func TestWriterRefusesAWrongSize(t *testing.T) {
	tw := tarstream.NewWriter(io.Discard)
	if err := tw.WriteHeader(&tarstream.Header{Name: "f", Typeflag: tarstream.TypeReg, Size: 3}); err != nil {
		t.Fatal(err)
	}
	if n, err := tw.Write([]byte("abcd")); n != 3 || !errors.Is(err, tarstream.ErrWriteTooLong) {
		t.Fatalf("Write past the size: %d, %v", n, err)
	}
	tw = tarstream.NewWriter(io.Discard)
	_ = tw.WriteHeader(&tarstream.Header{Name: "f", Typeflag: tarstream.TypeReg, Size: 3})
	_, _ = tw.Write([]byte("ab"))
	if err := tw.Close(); err == nil {
		t.Fatal("Close after a short entry: no error")
	}
}

// TestReaderRefusesBadStreams: a stream cut inside a header or an entry
// is io.ErrUnexpectedEOF, a corrupted header ErrHeader; a clean end at an
// entry boundary is io.EOF (the caller checks for the end marker).
func TestReaderRefusesBadStreams(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, Size: 700})
	_, _ = tw.Write(bytes.Repeat([]byte("z"), 700))
	_ = tw.WriteHeader(&tar.Header{Name: strings.Repeat("n", 300), Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	_, _ = tw.Write([]byte("!"))
	_ = tw.Close()
	full := buf.Bytes()

	readAll := func(b []byte) error {
		tr := tarstream.NewReader(bytes.NewReader(b))
		for {
			if _, err := tr.Next(); err != nil {
				return err
			}
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return err
			}
		}
	}
	if err := readAll(full); !errors.Is(err, io.EOF) {
		t.Fatalf("the whole stream: %v", err)
	}
	for _, cut := range []int{100, 512 + 300, 512 + 700, 1536 + 200} {
		if err := readAll(full[:cut]); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	if err := readAll(full[:1536]); !errors.Is(err, io.EOF) {
		t.Errorf("cut at the entry boundary: %v, want io.EOF", err)
	}
	bad := bytes.Clone(full)
	bad[10] ^= 0x20 // a byte of the first name: the checksum no longer matches
	if err := readAll(bad); !errors.Is(err, tarstream.ErrHeader) {
		t.Errorf("corrupted header: %v, want ErrHeader", err)
	}
}
