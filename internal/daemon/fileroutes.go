package daemon

import (
	"archive/tar"
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
)

// FileStore is what the files API serves from (the sandbox manager). limit
// bounds the bytes of file content one call moves.
type FileStore interface {
	Stat(ctx context.Context, f api.FileRef) (api.FileInfo, error)
	List(ctx context.Context, f api.FileRef) (api.FileList, error)
	// Read writes f.Path as a tar stream named from its base name.
	Read(ctx context.Context, f api.FileRef, limit int64, w io.Writer) error
	// WriteTar extracts a tar stream into the existing directory f.Path.
	WriteTar(ctx context.Context, f api.FileRef, limit int64, r io.Reader) error
	WriteFile(ctx context.Context, f api.FileRef, mode fs.FileMode, limit int64, r io.Reader) error
	Remove(ctx context.Context, f api.FileRef) error
}

// FileRoutesOptions configure FileRoutes.
type FileRoutesOptions struct {
	// MaxBytes bounds the file content of one upload or download (default
	// DefaultFileMaxBytes); more is refused with 413.
	MaxBytes int64
	// IsUnavailable reports errors of a backend that is down (→ 503).
	IsUnavailable func(error) bool
	// Logf receives panics recovered on the routes' helper goroutines.
	Logf func(format string, args ...any)
	// Audit, when set, records every upload, download and removal with
	// its bytes and SHA-256 (computed while streaming) once it ended;
	// while Audit.Check fails (audit.onFailure refuse and a record could
	// not be written) transfers are refused with 503.
	Audit FileAudit
}

// FileAudit is the audit log as the files API uses it (audit.Log).
type FileAudit interface {
	audit.Recorder
	Check() error
}

// DefaultFileMaxBytes is the default size limit of one file transfer.
const DefaultFileMaxBytes = 1 << 30

// tarOverhead is what a tar stream may add to its files' content (headers
// and padding), beyond which an upload is refused before it is read.
const tarOverhead = 16 << 20

// FileRoutes are the files API:
//
//	GET    /v1/files?agent=A&path=P[&format=raw|tar]  download (raw: a file's bytes; tar: as docker cp)
//	PUT    /v1/files?agent=A&path=P[&mode=0644]       upload a file, or (Content-Type application/x-tar) extract into directory P
//	DELETE /v1/files?agent=A&path=P                   remove P recursively
//	GET    /v1/files/stat?agent=A&path=P              describe P
//	GET    /v1/files/list?agent=A&path=P              list directory P
//
// Paths are absolute paths inside the agent's sandbox (session=K picks a
// session-scoped one) and are resolved there, never on the daemon's host.
// A pinned client reaches only its own agent's sandbox. The server serves
// them for Options.Files.
func FileRoutes(store FileStore, opts FileRoutesOptions) map[string]http.Handler {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultFileMaxBytes
	}
	h := &fileHandler{store: store, opts: opts}
	return map[string]http.Handler{
		"GET /v1/files":      http.HandlerFunc(h.get),
		"PUT /v1/files":      http.HandlerFunc(h.put),
		"DELETE /v1/files":   http.HandlerFunc(h.remove),
		"GET /v1/files/stat": http.HandlerFunc(h.stat),
		"GET /v1/files/list": http.HandlerFunc(h.list),
	}
}

type fileHandler struct {
	store FileStore
	opts  FileRoutesOptions
}

// ErrOtherAgent refuses a pinned client's request for another agent.
var ErrOtherAgent = fmt.Errorf("%w: an agent token reaches only its own agent's sandbox", cerrdefs.ErrPermissionDenied)

// ref parses the query once: path required, agent checked against a pin.
func (h *fileHandler) ref(r *http.Request) (api.FileRef, error) {
	q := r.URL.Query()
	f := api.FileRef{AgentID: q.Get("agent"), SessionKey: q.Get("session"), Path: q.Get("path")}
	if f.Path == "" {
		return f, fmt.Errorf("%w: query parameter path is required (an absolute path inside the sandbox)", cerrdefs.ErrInvalidArgument)
	}
	if pin, ok := PinFrom(r.Context()); ok {
		if f.AgentID != "" && f.AgentID != pin.AgentID {
			return f, fmt.Errorf("%w (asked for %q)", ErrOtherAgent, f.AgentID)
		}
		f.AgentID = pin.AgentID
	}
	return f, nil
}

// status is err's status code (httpStatus), but content over the files
// API's byte limit (resource exhausted) is 413.
func (h *fileHandler) status(err error) int {
	if cerrdefs.IsResourceExhausted(err) {
		return http.StatusRequestEntityTooLarge
	}
	return httpStatus(err, h.opts.IsUnavailable)
}

func (h *fileHandler) fail(w http.ResponseWriter, err error) {
	writeError(w, h.status(err), err)
}

func (h *fileHandler) stat(w http.ResponseWriter, r *http.Request) {
	f, err := h.ref(r)
	if err == nil {
		var fi api.FileInfo
		if fi, err = h.store.Stat(r.Context(), f); err == nil {
			writeJSON(w, http.StatusOK, fi)
			return
		}
	}
	h.fail(w, err)
}

func (h *fileHandler) list(w http.ResponseWriter, r *http.Request) {
	f, err := h.ref(r)
	if err == nil {
		var l api.FileList
		if l, err = h.store.List(r.Context(), f); err == nil {
			writeJSON(w, http.StatusOK, l)
			return
		}
	}
	h.fail(w, err)
}

func (h *fileHandler) remove(w http.ResponseWriter, r *http.Request) {
	f, err := h.ref(r)
	if err == nil {
		err = h.auditCheck()
	}
	if err == nil {
		err = h.store.Remove(r.Context(), f)
		h.record(r.Context(), f, audit.File{Direction: audit.DirectionRemove}, nil, err)
		if err == nil {
			writeJSON(w, http.StatusOK, api.FileRemoved{Removed: f.Path})
			return
		}
	}
	h.fail(w, err)
}

// get streams the tar from the store; the status is chosen once the
// first header arrived (the store checks size and existence before it
// writes), so failures are answered as errors, not as a cut stream.
func (h *fileHandler) get(w http.ResponseWriter, r *http.Request) {
	f, err := h.ref(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	format := r.URL.Query().Get("format")
	if format != "" && format != "raw" && format != "tar" {
		h.fail(w, fmt.Errorf("%w: format %q: want raw or tar", cerrdefs.ErrInvalidArgument, format))
		return
	}
	if err := h.auditCheck(); err != nil {
		h.fail(w, err)
		return
	}
	// What the client gets is hashed and counted as it goes.
	out := &digestWriter{w: w, h: sha256.New()}
	rec := audit.File{Direction: audit.DirectionOut, Format: "raw"}
	var sent error
	answered := false // a 200 went out: the transfer began
	defer func() {
		if answered {
			h.record(r.Context(), f, rec, out, sent)
		}
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			pw.CloseWithError(err)
			done <- err
		}()
		defer recoverInto(&err, "the file download", h.opts.Logf)
		err = h.store.Read(ctx, f, h.opts.MaxBytes, pw)
	}()
	defer func() { pr.CloseWithError(io.ErrClosedPipe); <-done }()
	br := bufio.NewReaderSize(pr, 64<<10)
	if _, err := br.Peek(512); err != nil {
		h.fail(w, readErr(err))
		return
	}
	if format == "tar" {
		rec.Format = "tar"
		w.Header().Set("Content-Type", api.ContentTypeTar)
		answered = true
		w.WriteHeader(http.StatusOK)
		if _, err := io.Copy(out, br); err != nil {
			sent = err
			panic(http.ErrAbortHandler) // the client must not take a cut stream for the whole
		}
		return
	}
	tr := tar.NewReader(br)
	hdr, err := tr.Next()
	if err != nil {
		h.fail(w, readErr(err))
		return
	}
	if hdr.Typeflag != tar.TypeReg {
		if format == "raw" {
			h.fail(w, fmt.Errorf("%w: %s is not a regular file (ask for format=tar)", cerrdefs.ErrInvalidArgument, f.Path))
			return
		}
		// No format asked: a directory comes as tar.
		rec.Format = "tar"
		w.Header().Set("Content-Type", api.ContentTypeTar)
		answered = true
		w.WriteHeader(http.StatusOK)
		tw := tar.NewWriter(out)
		for ; err == nil; hdr, err = tr.Next() {
			if werr := tw.WriteHeader(hdr); werr != nil {
				sent = werr
				panic(http.ErrAbortHandler)
			}
			if _, werr := io.Copy(tw, tr); werr != nil {
				sent = werr
				panic(http.ErrAbortHandler)
			}
		}
		if !errors.Is(err, io.EOF) {
			sent = err
			panic(http.ErrAbortHandler)
		}
		if werr := tw.Close(); werr != nil {
			sent = werr
			panic(http.ErrAbortHandler)
		}
		return
	}
	w.Header().Set("Content-Type", api.ContentTypeBinary)
	w.Header().Set("Content-Length", strconv.FormatInt(hdr.Size, 10))
	answered = true
	w.WriteHeader(http.StatusOK)
	if n, err := io.Copy(out, tr); err != nil || n != hdr.Size {
		sent = cmp.Or(err, io.ErrUnexpectedEOF)
		panic(http.ErrAbortHandler)
	}
}

// readErr is the store's error behind a read of its pipe.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("files: the sandbox sent an empty or truncated archive: %w", err)
	}
	return err
}

func (h *fileHandler) put(w http.ResponseWriter, r *http.Request) {
	f, err := h.ref(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	isTar := strings.HasPrefix(r.Header.Get("Content-Type"), api.ContentTypeTar)
	max := h.opts.MaxBytes
	if isTar {
		max += tarOverhead
	}
	if r.ContentLength > max {
		h.fail(w, fmt.Errorf("%w: the upload is %d bytes, over the limit of %d bytes", cerrdefs.ErrResourceExhausted, r.ContentLength, h.opts.MaxBytes))
		return
	}
	mode := fs.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" && !isTar {
		v, perr := strconv.ParseUint(m, 8, 32)
		if perr != nil || v > 0o777 {
			h.fail(w, fmt.Errorf("%w: mode %q: want octal permission bits such as 0644", cerrdefs.ErrInvalidArgument, m))
			return
		}
		mode = fs.FileMode(v)
	}
	if err := h.auditCheck(); err != nil {
		h.fail(w, err)
		return
	}
	// The upload is hashed and counted as it streams to the sandbox.
	in := &digestReader{r: r.Body, h: sha256.New()}
	body := uploadBody(w, in, h.opts.MaxBytes, isTar)
	rec := audit.File{Direction: audit.DirectionIn, Format: "raw"}
	if isTar {
		rec.Format = "tar"
		err = h.store.WriteTar(r.Context(), f, h.opts.MaxBytes, body)
	} else {
		err = h.store.WriteFile(r.Context(), f, mode, h.opts.MaxBytes, body)
	}
	h.record(r.Context(), f, rec, in, err)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FileWritten{Written: f.Path})
}

// auditCheck refuses a transfer while the audit log cannot be written
// (audit.onFailure refuse).
func (h *fileHandler) auditCheck() error {
	if h.opts.Audit == nil {
		return nil
	}
	return h.opts.Audit.Check()
}

// digest is the count and SHA-256 of the bytes a transfer moved.
type digest interface {
	sum() (int64, string)
}

// record writes the file.transfer record of a transfer that ended with
// err (nil: it succeeded).
func (h *fileHandler) record(ctx context.Context, f api.FileRef, rec audit.File, d digest, err error) {
	if h.opts.Audit == nil {
		return
	}
	rec.Path = f.Path
	if d != nil {
		rec.Bytes, rec.SHA256 = d.sum()
	}
	if err != nil {
		rec.Error = err.Error()
	}
	_ = h.opts.Audit.Record(ctx, audit.Record{Kind: audit.KindFileTransfer, AgentID: f.AgentID, SessionKey: f.SessionKey,
		Host: "sandbox", File: &rec})
}

// digestWriter hashes and counts what passes through it.
type digestWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (d *digestWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	return n, err
}

func (d *digestWriter) sum() (int64, string) { return d.n, hex.EncodeToString(d.h.Sum(nil)) }

// digestReader hashes and counts what is read through it.
type digestReader struct {
	r io.ReadCloser
	h hash.Hash
	n int64
}

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	return n, err
}

func (d *digestReader) Close() error { return d.r.Close() }

func (d *digestReader) sum() (int64, string) { return d.n, hex.EncodeToString(d.h.Sum(nil)) }
