package cli

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestFaultCheckedTarCutShort: a tar stream cut anywhere — inside an
// entry, at an entry boundary, inside the end marker — is an error
// wrapping io.ErrUnexpectedEOF, never a clean end; the whole archive
// passes (issue 31: cp - exited 0 with a truncated tar).
func TestFaultCheckedTarCutShort(t *testing.T) {
	var whole bytes.Buffer
	tw := tar.NewWriter(&whole)
	for _, name := range []string{"a", "b"} {
		data := bytes.Repeat([]byte{0}, 1500) // zeros: a cut after them looks like padding
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := whole.Bytes()
	var out bytes.Buffer
	if err := copyCheckedTar(&out, bytes.NewReader(b)); err != nil || !bytes.Equal(out.Bytes(), b) {
		t.Fatalf("whole archive: %v, %d of %d bytes", err, out.Len(), len(b))
	}
	entry := 512 + 1536 // one header and its padded data
	for _, cut := range []int{100, 600, entry, 2 * entry, 2*entry + 512, len(b) - 1} {
		err := copyCheckedTar(io.Discard, bytes.NewReader(b[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d of %d: %v, want io.ErrUnexpectedEOF", cut, len(b), err)
		}
	}
}
