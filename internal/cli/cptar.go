package cli

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
)

// endMarker is the end of a tar archive: two zero blocks.
const endMarker = 2 * 512

// checkedTar reads a tar stream from the daemon and tells a whole archive
// from one cut short. The light client's HTTP/1.0 answer ends when the
// connection closes, so a daemon that fails in the middle of a download
// looks like the end of the body; the archive's own end marker is what
// says it arrived whole. The caller must read each entry's data to its
// end before the next Next.
type checkedTar struct {
	*tar.Reader
	in *countingReader
}

func newCheckedTar(r io.Reader) *checkedTar {
	in := &countingReader{r: r}
	return &checkedTar{Reader: tar.NewReader(in), in: in}
}

// Next is tar.Reader.Next; an archive that ends without its end marker is
// an error wrapping io.ErrUnexpectedEOF, not io.EOF.
func (t *checkedTar) Next() (*tar.Header, error) {
	before := t.in.n
	hdr, err := t.Reader.Next()
	// Next reads the last entry's padding (under one block) and then the
	// marker's blocks: at least endMarker bytes when the marker is there.
	if errors.Is(err, io.EOF) && t.in.n-before < endMarker {
		return nil, fmt.Errorf("the archive ends without its end marker: the transfer was cut short: %w", io.ErrUnexpectedEOF)
	}
	return hdr, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// copyCheckedTar copies the tar stream r to w as it is, failing (after
// writing what arrived) when it is not a whole archive.
func copyCheckedTar(w io.Writer, r io.Reader) error {
	tee := io.TeeReader(r, w)
	tr := newCheckedTar(tee)
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the archive: %w", err)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return fmt.Errorf("read the archive: %w", err)
		}
	}
	// Whatever follows the marker (a writer's record padding) goes too.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("read the archive: %w", err)
	}
	return nil
}
