package e2b

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/shellword"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// maxMessageBytes bounds one envd request message (input sent to a
// process is one message).
const maxMessageBytes = 4 << 20

// envdRoutes adds the envd API: Connect RPC of the process and filesystem
// services, the files transfer endpoints and /health.
func (s *Server) envdRoutes() {
	opt := connect.WithHandlerOptions(connect.WithCodec(jsonCodec{}), connect.WithReadMaxBytes(maxMessageBytes))
	rpc := map[string]http.Handler{
		"/process.Process/Start":      connect.NewServerStreamHandler("/process.Process/Start", s.procStart, opt),
		"/process.Process/Connect":    connect.NewServerStreamHandler("/process.Process/Connect", s.procConnect, opt),
		"/process.Process/List":       connect.NewUnaryHandler("/process.Process/List", s.procList, opt),
		"/process.Process/SendInput":  connect.NewUnaryHandler("/process.Process/SendInput", s.procSendInput, opt),
		"/process.Process/CloseStdin": connect.NewUnaryHandler("/process.Process/CloseStdin", s.procCloseStdin, opt),
		"/process.Process/SendSignal": connect.NewUnaryHandler("/process.Process/SendSignal", s.procSendSignal, opt),
		"/process.Process/Update":     connect.NewUnaryHandler("/process.Process/Update", s.procUpdate, opt),

		"/filesystem.Filesystem/Stat":     connect.NewUnaryHandler("/filesystem.Filesystem/Stat", s.fsStat, opt),
		"/filesystem.Filesystem/ListDir":  connect.NewUnaryHandler("/filesystem.Filesystem/ListDir", s.fsListDir, opt),
		"/filesystem.Filesystem/MakeDir":  connect.NewUnaryHandler("/filesystem.Filesystem/MakeDir", s.fsMakeDir, opt),
		"/filesystem.Filesystem/Move":     connect.NewUnaryHandler("/filesystem.Filesystem/Move", s.fsMove, opt),
		"/filesystem.Filesystem/Remove":   connect.NewUnaryHandler("/filesystem.Filesystem/Remove", s.fsRemove, opt),
		"/filesystem.Filesystem/WatchDir": connect.NewServerStreamHandler("/filesystem.Filesystem/WatchDir", s.fsWatchDir, opt),

		"/filesystem.Filesystem/CreateWatcher":    connect.NewUnaryHandler("/filesystem.Filesystem/CreateWatcher", s.fsCreateWatcher, opt),
		"/filesystem.Filesystem/GetWatcherEvents": connect.NewUnaryHandler("/filesystem.Filesystem/GetWatcherEvents", s.fsGetWatcherEvents, opt),
		"/filesystem.Filesystem/RemoveWatcher":    connect.NewUnaryHandler("/filesystem.Filesystem/RemoveWatcher", s.fsRemoveWatcher, opt),
	}
	for p, h := range rpc {
		s.mux.Handle(p, s.envd(h))
	}
	s.mux.Handle("GET /files", s.envd(http.HandlerFunc(s.readFile)))
	s.mux.Handle("POST /files", s.envd(http.HandlerFunc(s.writeFiles)))
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("E2b-Sandbox-Id"); id != "" && !s.reg.running(id) {
			apiError(w, http.StatusBadGateway, "sandbox "+id+" is not running")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// envd authenticates an envd request: the sandbox it names
// (E2b-Sandbox-Id) and that sandbox's access token (X-Access-Token).
func (s *Server) envd(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("E2b-Sandbox-Id")
		rec, ok := s.reg.byToken(id, r.Header.Get("X-Access-Token"))
		switch {
		case ok && rec.Paused:
			apiError(w, http.StatusBadGateway, "sandbox "+id+" is paused: connect resumes it")
		case ok:
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rec)))
		case s.reg.exists(id):
			apiError(w, http.StatusUnauthorized, "invalid access token for sandbox "+id)
		default:
			// What E2B's edge answers for a sandbox that is gone.
			apiError(w, http.StatusBadGateway, "sandbox "+id+" is not running")
		}
	})
}

func entryOf(fi api.FileInfo) entryInfo {
	e := entryInfo{Name: fi.Name, Path: fi.Path, Size: int64String(fi.Size), Mode: fi.Mode, ModifiedTime: fi.ModTime}
	mode := fs.FileMode(fi.Mode).Perm()
	switch fi.Type {
	case "file":
		e.Type = fileTypeFile
	case "dir":
		e.Type, mode = fileTypeDirectory, mode|fs.ModeDir
	case "symlink":
		e.Type, mode = fileTypeSymlink, mode|fs.ModeSymlink
		target := fi.LinkTarget
		e.SymlinkTarget = &target
	default:
		e.Type = fileTypeOther
	}
	e.Permissions = mode.String()
	return e
}

func (s *Server) fsStat(ctx context.Context, req *connect.Request[pathRequest]) (*connect.Response[entryResponse], error) {
	fi, err := s.opts.Sandboxes.StatFile(ctx, scopeOf(sandboxOf(ctx)), req.Msg.Path)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&entryResponse{Entry: entryOf(fi)}), nil
}

// maxListDepth bounds ListDir's and a recursive watch's walk.
const maxListDepth = 32

func (s *Server) walk(ctx context.Context, rec record, dir string, depth int, out *[]entryInfo) error {
	list, err := s.opts.Sandboxes.ListFiles(ctx, scopeOf(rec), dir)
	if err != nil {
		return err
	}
	for _, fi := range list.Entries {
		*out = append(*out, entryOf(fi))
		if fi.Type == "dir" && depth > 1 {
			if err := s.walk(ctx, rec, fi.Path, depth-1, out); err != nil && !cerrdefs.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func (s *Server) fsListDir(ctx context.Context, req *connect.Request[listDirRequest]) (*connect.Response[listDirResponse], error) {
	depth := int(req.Msg.Depth)
	if depth == 0 {
		depth = 1
	}
	if depth > maxListDepth {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("depth %d is over %d", depth, maxListDepth))
	}
	out := listDirResponse{Entries: []entryInfo{}}
	if err := s.walk(ctx, sandboxOf(ctx), req.Msg.Path, depth, &out.Entries); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&out), nil
}

// run runs a command line in the sandbox as a session (the guard and the
// limits apply as to any command) and fails unless it exits 0.
func (s *Server) run(ctx context.Context, rec record, line string) error {
	yield := float64(120000)
	res, err := s.opts.Tools.Exec(ctx, api.ExecParams{Command: line, YieldMs: &yield, Host: string(vocab.HostSandbox),
		AgentID: rec.AgentID, SessionKey: rec.ID})
	if err != nil {
		return err
	}
	if code, ok := res.Details.ExitCode.Int(); res.Details.Status != api.StatusCompleted || !ok || code != 0 {
		return fmt.Errorf("%s: %s", line, strings.TrimSpace(resultText(res)))
	}
	return nil
}

// quoteAll is the shell line of words (shellword.Join), a word that has
// no POSIX form being the caller's bad argument.
func quoteAll(words ...string) (string, error) {
	line, err := shellword.Join(words)
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	return line, nil
}

func (s *Server) fsMakeDir(ctx context.Context, req *connect.Request[pathRequest]) (*connect.Response[entryResponse], error) {
	rec := sandboxOf(ctx)
	if _, err := s.opts.Sandboxes.StatFile(ctx, scopeOf(rec), req.Msg.Path); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists", req.Msg.Path))
	}
	line, err := quoteAll("mkdir", "-p", "--", req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx, rec, line); err != nil {
		return nil, connectError(err)
	}
	return s.fsStat(ctx, req)
}

func (s *Server) fsMove(ctx context.Context, req *connect.Request[moveRequest]) (*connect.Response[entryResponse], error) {
	rec := sandboxOf(ctx)
	if _, err := s.opts.Sandboxes.StatFile(ctx, scopeOf(rec), req.Msg.Source); err != nil {
		return nil, connectError(err)
	}
	line, err := quoteAll("mv", "-f", "--", req.Msg.Source, req.Msg.Destination)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx, rec, line); err != nil {
		return nil, connectError(err)
	}
	fi, err := s.opts.Sandboxes.StatFile(ctx, scopeOf(rec), req.Msg.Destination)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&entryResponse{Entry: entryOf(fi)}), nil
}

func (s *Server) fsRemove(ctx context.Context, req *connect.Request[pathRequest]) (*connect.Response[empty], error) {
	if err := s.opts.Sandboxes.RemoveFile(ctx, scopeOf(sandboxOf(ctx)), req.Msg.Path); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&empty{}), nil
}

// watchInterval is how often a watch lists the directory: sandboxctl has
// no inotify inside the sandbox, so a watch compares listings.
const watchInterval = 200 * time.Millisecond

type watchState struct {
	size  int64
	mtime time.Time
}

func (s *Server) snapshot(ctx context.Context, rec record, dir string, recursive bool) (map[string]watchState, error) {
	depth := 1
	if recursive {
		depth = maxListDepth
	}
	var entries []entryInfo
	if err := s.walk(ctx, rec, dir, depth, &entries); err != nil {
		return nil, err
	}
	out := make(map[string]watchState, len(entries))
	for _, e := range entries {
		rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, path.Clean(dir)), "/")
		out[rel] = watchState{size: int64(e.Size), mtime: e.ModifiedTime}
	}
	return out, nil
}

func (s *Server) fsWatchDir(ctx context.Context, req *connect.Request[watchDirRequest], st *connect.ServerStream[watchDirResponse]) error {
	rec := sandboxOf(ctx)
	if req.Msg.IncludeEntry {
		return connect.NewError(connect.CodeUnimplemented, errors.New("includeEntry is not supported"))
	}
	prev, err := s.snapshot(ctx, rec, req.Msg.Path, req.Msg.Recursive)
	if err != nil {
		return connectError(err)
	}
	if err := st.Send(&watchDirResponse{Start: &empty{}}); err != nil {
		return err
	}
	keepalive := keepaliveOf(req.Header())
	lastSent := time.Now()
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := s.snapshot(ctx, rec, req.Msg.Path, req.Msg.Recursive)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return connectError(err)
		}
		events := diffSnapshots(prev, cur)
		prev = cur
		for i := range events {
			if err := st.Send(&watchDirResponse{Filesystem: &events[i]}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		if time.Since(lastSent) >= keepalive {
			if err := st.Send(&watchDirResponse{Keepalive: &empty{}}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
	}
}

// diffSnapshots returns the events that turn listing prev into cur.
func diffSnapshots(prev, cur map[string]watchState) []filesystemEvent {
	events := []filesystemEvent{}
	for name, c := range cur {
		p, ok := prev[name]
		switch {
		case !ok:
			events = append(events, filesystemEvent{Name: name, Type: eventCreate})
		case p != c:
			events = append(events, filesystemEvent{Name: name, Type: eventWrite})
		}
	}
	for name := range prev {
		if _, ok := cur[name]; !ok {
			events = append(events, filesystemEvent{Name: name, Type: eventRemove})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].Name < events[j].Name })
	return events
}

// maxWatchers bounds the polled watchers (CreateWatcher) of one sandbox.
const maxWatchers = 64

// watcher is one polled watch (CreateWatcher): its directory and the
// listing of its last GetWatcherEvents.
type watcher struct {
	sandboxID string
	path      string
	recursive bool
	prev      map[string]watchState
}

func (s *Server) fsCreateWatcher(ctx context.Context, req *connect.Request[watchDirRequest]) (*connect.Response[createWatcherResponse], error) {
	rec := sandboxOf(ctx)
	if req.Msg.IncludeEntry {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("includeEntry is not supported"))
	}
	snap, err := s.snapshot(ctx, rec, req.Msg.Path, req.Msg.Recursive)
	if err != nil {
		return nil, connectError(err)
	}
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	n := 0
	for _, w := range s.watchers {
		if w.sandboxID == rec.ID {
			n++
		}
	}
	if n >= maxWatchers {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("sandbox %s has %d watchers, the most it may have", rec.ID, maxWatchers))
	}
	id := newID(8)
	s.watchers[id] = &watcher{sandboxID: rec.ID, path: req.Msg.Path, recursive: req.Msg.Recursive, prev: snap}
	return connect.NewResponse(&createWatcherResponse{WatcherID: id}), nil
}

// watcherOf returns the sandbox's watcher id.
func (s *Server) watcherOf(rec record, id string) (*watcher, error) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	w, ok := s.watchers[id]
	if !ok || w.sandboxID != rec.ID {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %s not found", id))
	}
	return w, nil
}

func (s *Server) fsGetWatcherEvents(ctx context.Context, req *connect.Request[watcherRequest]) (*connect.Response[watcherEventsResponse], error) {
	rec := sandboxOf(ctx)
	w, err := s.watcherOf(rec, req.Msg.WatcherID)
	if err != nil {
		return nil, err
	}
	cur, err := s.snapshot(ctx, rec, w.path, w.recursive)
	if err != nil {
		return nil, connectError(err)
	}
	s.watchMu.Lock()
	events := diffSnapshots(w.prev, cur)
	w.prev = cur
	s.watchMu.Unlock()
	return connect.NewResponse(&watcherEventsResponse{Events: events}), nil
}

func (s *Server) fsRemoveWatcher(ctx context.Context, req *connect.Request[watcherRequest]) (*connect.Response[empty], error) {
	if _, err := s.watcherOf(sandboxOf(ctx), req.Msg.WatcherID); err != nil {
		return nil, err
	}
	s.watchMu.Lock()
	delete(s.watchers, req.Msg.WatcherID)
	s.watchMu.Unlock()
	return connect.NewResponse(&empty{}), nil
}

// forgetWatchers drops the watchers of a sandbox that is gone.
func (s *Server) forgetWatchers(sandboxID string) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for id, w := range s.watchers {
		if w.sandboxID == sandboxID {
			delete(s.watchers, id)
		}
	}
}

// fileError writes the envd error of a file transfer.
func fileError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case cerrdefs.IsNotFound(err):
		code = http.StatusNotFound
	case cerrdefs.IsInvalidArgument(err), toolapi.IsInvalidInput(err):
		code = http.StatusBadRequest
	case cerrdefs.IsPermissionDenied(err):
		code = http.StatusForbidden
	}
	apiError(w, code, err.Error())
}

// readFile serves GET /files?path=P: the file's bytes.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	rec := sandboxOf(r.Context())
	p := r.URL.Query().Get("path")
	if p == "" {
		apiError(w, http.StatusBadRequest, "path is required")
		return
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		pw.CloseWithError(s.opts.Sandboxes.ReadFiles(ctx, scopeOf(rec), p, s.opts.FilesMaxBytes, pw))
	}()
	defer pr.Close()
	tr := tar.NewReader(pr)
	hdr, err := tr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %s", cerrdefs.ErrNotFound, p)
		}
		fileError(w, err)
		return
	}
	if hdr.Typeflag != tar.TypeReg {
		apiError(w, http.StatusBadRequest, p+" is not a regular file")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(hdr.Size))
	if _, err := io.Copy(w, tr); err != nil {
		// Headers are sent: cutting the connection short is what tells
		// the client (Content-Length) that the transfer failed.
		panic(http.ErrAbortHandler)
	}
}

// writtenEntry is one file of POST /files' answer.
type writtenEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// writeOne writes one file, making its directory first when missing.
func (s *Server) writeOne(ctx context.Context, rec record, p string, body io.Reader) (writtenEntry, error) {
	if p == "" {
		return writtenEntry{}, fmt.Errorf("%w: a file path is required", cerrdefs.ErrInvalidArgument)
	}
	dir := path.Dir(p)
	if _, err := s.opts.Sandboxes.StatFile(ctx, scopeOf(rec), dir); cerrdefs.IsNotFound(err) {
		line, err := quoteAll("mkdir", "-p", "--", dir)
		if err != nil {
			return writtenEntry{}, err
		}
		if err := s.run(ctx, rec, line); err != nil {
			return writtenEntry{}, err
		}
	}
	if err := s.opts.Sandboxes.WriteFile(ctx, scopeOf(rec), p, 0o644, s.opts.FilesMaxBytes, body); err != nil {
		return writtenEntry{}, err
	}
	return writtenEntry{Name: path.Base(p), Type: "file", Path: p}, nil
}

// writeFiles serves POST /files: one file as application/octet-stream
// (?path=P) or files as multipart/form-data parts "file" named by their
// path.
func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request) {
	rec := sandboxOf(r.Context())
	qpath := r.URL.Query().Get("path")
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Header.Get("Content-Encoding") != "" {
		apiError(w, http.StatusBadRequest, "Content-Encoding is not supported")
		return
	}
	var out []writtenEntry
	if mt != "multipart/form-data" {
		e, err := s.writeOne(r.Context(), rec, qpath, r.Body)
		if err != nil {
			fileError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, []writtenEntry{e})
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, err.Error())
			return
		}
		if part.FormName() != "file" {
			continue
		}
		// The file name is the path (multipart's FileName keeps only the
		// base name).
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		target := params["filename"]
		if qpath != "" {
			target = qpath
		}
		e, err := s.writeOne(r.Context(), rec, target, part)
		if err != nil {
			fileError(w, err)
			return
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		apiError(w, http.StatusBadRequest, "no file part in the upload")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
