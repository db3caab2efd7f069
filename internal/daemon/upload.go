package daemon

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	cerrdefs "github.com/containerd/errdefs"
)

// spoolUpload reads a whole upload body into an unlinked temporary file in
// dir (the daemon's TMPDIR when empty) and checks it against limit before
// any of it reaches a sandbox: a raw body over limit bytes, a tar stream
// over limit+tarOverhead bytes or whose files hold more than limit bytes,
// is refused (cerrdefs.ErrResourceExhausted: 413) whatever its encoding,
// Content-Length or chunked, and a malformed tar stream is refused
// (ErrInvalidArgument). So a refused upload leaves nothing in the sandbox,
// and an extraction never stops half-way at the limit. The file is
// positioned at its start; closing it frees the space (it has no name,
// so a crash leaves nothing behind either).
func spoolUpload(w http.ResponseWriter, body io.ReadCloser, dir string, limit int64, isTar bool) (*os.File, error) {
	max := limit
	if isTar {
		max += tarOverhead
	}
	f, err := os.CreateTemp(dir, "sandboxctl-upload-*")
	if err != nil {
		return nil, fmt.Errorf("files: spool the upload: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("files: spool the upload: %w", err)
	}
	if err := spool(w, f, body, max, limit, isTar); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// spoolChunk is the size of one read of an upload body and one write to
// its spool file.
const spoolChunk = 1 << 20

// writerOnly hides its Writer's ReadFrom, so that io.CopyBuffer uses the
// buffer it is given.
type writerOnly struct{ io.Writer }

func spool(w http.ResponseWriter, f *os.File, body io.ReadCloser, max, limit int64, isTar bool) error {
	tooBig := fmt.Errorf("%w: the upload is over the limit of %d bytes", cerrdefs.ErrResourceExhausted, limit)
	// Large reads and writes: io.Copy into the file would take 32 KiB at a
	// time (os.File.ReadFrom falls back to it for a body).
	buf := make([]byte, spoolChunk)
	if _, err := io.CopyBuffer(writerOnly{f}, http.MaxBytesReader(w, body, max), buf); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooBig
		}
		return fmt.Errorf("files: read the upload: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("files: spool the upload: %w", err)
	}
	if !isTar {
		return nil
	}
	tr := tar.NewReader(f)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: bad tar stream: %v", cerrdefs.ErrInvalidArgument, err)
		}
		if hdr.Size < 0 || hdr.Size > limit-total {
			return fmt.Errorf("%w: the archive holds more than the limit of %d bytes", cerrdefs.ErrResourceExhausted, limit)
		}
		total += hdr.Size
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("files: spool the upload: %w", err)
	}
	return nil
}
