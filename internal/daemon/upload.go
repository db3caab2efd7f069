package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	cerrdefs "github.com/containerd/errdefs"
)

// uploadBody bounds an upload body as it streams to the store: past max
// bytes (limit, plus tarOverhead for a tar stream), whatever its encoding,
// Content-Length or chunked, a read fails with cerrdefs.ErrResourceExhausted
// (413) naming limit. The store keeps a refused, broken or cut-short upload
// from changing anything (the file tool stages it and commits only a
// complete one; the Engine path checks it whole first).
func uploadBody(w http.ResponseWriter, body io.ReadCloser, limit int64, isTar bool) io.Reader {
	max := limit
	if isTar {
		max += tarOverhead
	}
	return &boundedBody{r: http.MaxBytesReader(w, body, max), limit: limit}
}

type boundedBody struct {
	r     io.Reader
	limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		err = fmt.Errorf("%w: the upload is over the limit of %d bytes", cerrdefs.ErrResourceExhausted, b.limit)
	}
	return n, err
}
