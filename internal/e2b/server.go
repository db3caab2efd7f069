// Package e2b serves the E2B API in front of sandboxctl, so that the
// official E2B SDKs run unchanged against `sandboxctl serve --e2b ADDR`:
// the control API (sandboxes: create, connect, list, info, timeout, kill)
// and the in-sandbox "envd" API (processes and files, Connect RPC with the
// JSON codec, plus GET/POST /files and /health), both on one listener; an
// envd request names its sandbox in the E2b-Sandbox-Id header.
//
// It is another front door, not a side door: every process is a session
// of the sessions manager (guard, limits, audit, events, restart
// recovery), an E2B sandbox is the sandbox of scope (agent, sandbox id),
// and an API key is an agent token (<state>/agent-tokens.json) that never
// reaches another agent's sandboxes. docs/e2b.md is the compatibility
// table.
package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// envdVersion is the envd version this server answers as: the SDK turns
// features on by it (0.5.7: stdin close, octet-stream uploads; not 0.6.x:
// watch events with entries, file metadata).
const envdVersion = "0.5.7"

// Tools is what the envd process service needs of the sessions manager.
type Tools interface {
	Exec(ctx context.Context, p api.ExecParams) (api.Result, error)
	Process(ctx context.Context, p api.ProcessParams) (api.Result, error)
}

// Streams follows a session's exact output (*sessions.Manager).
type Streams interface {
	Follow(agentID, sessionKey, id string) (toolapi.Follower, error)
	FollowRaw(agentID, sessionKey, id string) (toolapi.Follower, error)
}

// Sandboxes is what the control API and the file service need of the
// sandbox manager.
type Sandboxes interface {
	Ensure(ctx context.Context, s sandbox.Scope) (sandbox.EnsureResult, error)
	Create(ctx context.Context, s sandbox.Scope, o sandbox.CreateOptions) (sandbox.Info, error)
	Remove(ctx context.Context, s sandbox.Scope) error
	StatFile(ctx context.Context, s sandbox.Scope, p string) (api.FileInfo, error)
	ListFiles(ctx context.Context, s sandbox.Scope, p string) (api.FileList, error)
	ReadFiles(ctx context.Context, s sandbox.Scope, p string, limit int64, w io.Writer) error
	WriteFile(ctx context.Context, s sandbox.Scope, p string, mode fs.FileMode, limit int64, r io.Reader) error
	RemoveFile(ctx context.Context, s sandbox.Scope, p string) error
}

// Pauser freezes and thaws a sandbox by container name
// (*sandbox.Manager's Pause and Resume). Without one, pause is 501.
type Pauser interface {
	Pause(ctx context.Context, ref string) (sandbox.Info, error)
	Resume(ctx context.Context, ref string) (sandbox.Info, error)
}

// Options configure a Server.
type Options struct {
	Tools     Tools
	Streams   Streams
	Sandboxes Sandboxes
	// Sessions lists an agent's sessions as GET /v1/sessions does
	// (*sessions.Manager.Sessions).
	Sessions func(agentID string) []api.Details
	// AgentTokens maps an API key (agent token) to its agent.
	AgentTokens map[string]string
	// Pauser serves pause and the resume of connect (nil: not supported).
	Pauser Pauser
	// ContainerPrefix is the configured docker.containerPrefix: it names
	// a sandbox's container for the Pauser.
	ContainerPrefix string
	// ScopeMode is the configured sandbox.scope; it must be "session" (one
	// container per E2B sandbox).
	ScopeMode string
	// StateDir keeps e2b-sandboxes.json.
	StateDir string
	// FilesMaxBytes bounds one file transfer.
	FilesMaxBytes int64
	// Templates checks a sandboxctl template name (sandbox.templates;
	// sandboxconfig.Config.TemplateDocker); nil knows the default only.
	Templates func(name string) error
	// CPUCount and MemoryMB describe the default template.
	CPUCount int
	MemoryMB int
	Logf     func(string, ...any)
	Now      func() time.Time
}

// Server is the E2B API.
type Server struct {
	opts Options
	reg  *registry
	mux  *http.ServeMux

	watchMu  sync.Mutex
	watchers map[string]*watcher
}

// createTimeout bounds the creation of one sandbox.
const createTimeout = 5 * time.Minute

// maxTimeout is the longest sandbox timeout accepted (E2B's own maximum).
const maxTimeout = 24 * time.Hour

// New returns the server; Run reaps sandboxes whose timeout passed.
func New(opts Options) (*Server, error) {
	if opts.ScopeMode != "session" {
		return nil, fmt.Errorf("e2b: the E2B API needs one container per sandbox: set sandbox.scope: session (it is %q)", opts.ScopeMode)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	reg, err := openRegistry(filepath.Join(opts.StateDir, "e2b-sandboxes.json"))
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, reg: reg, mux: http.NewServeMux(), watchers: map[string]*watcher{}}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	api := func(h func(http.ResponseWriter, *http.Request, string)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			agent, ok := s.opts.AgentTokens[r.Header.Get("X-API-KEY")]
			if !ok {
				apiError(w, http.StatusUnauthorized, "Invalid API key")
				return
			}
			h(w, r, agent)
		})
	}
	s.mux.Handle("POST /v2/sandboxes", api(s.create))
	s.mux.Handle("GET /v2/sandboxes", api(s.list))
	s.mux.Handle("GET /sandboxes", api(s.list))
	s.mux.Handle("GET /sandboxes/{id}", api(s.info))
	s.mux.Handle("DELETE /sandboxes/{id}", api(s.kill))
	s.mux.Handle("POST /sandboxes/{id}/timeout", api(s.setTimeout))
	s.mux.Handle("POST /v2/sandboxes/{id}/connect", api(s.connect))
	s.mux.Handle("POST /sandboxes/{id}/pause", api(s.pause))
	s.envdRoutes()
}

// ServeHTTP serves the control API and, for requests that name a sandbox
// (E2b-Sandbox-Id), its envd API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Run kills the sandboxes whose timeout passed until ctx is done.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.reap(ctx)
		}
	}
}

// reap kills the sandboxes whose timeout passed.
func (s *Server) reap(ctx context.Context) {
	for _, rec := range s.reg.expired(s.opts.Now()) {
		if err := s.destroy(ctx, rec); err != nil {
			s.opts.Logf("e2b: sandbox %s timed out: %v", rec.ID, err)
		}
	}
}

func scopeOf(rec record) sandbox.Scope {
	return sandbox.Scope{AgentID: rec.AgentID, SessionKey: rec.ID}
}

// containerOf names rec's container.
func (s *Server) containerOf(rec record) string {
	return sandbox.ContainerName(s.opts.ContainerPrefix, sandbox.ScopeKey("session", scopeOf(rec)))
}

// destroy removes rec's container and forgets it.
func (s *Server) destroy(ctx context.Context, rec record) error {
	if err := s.opts.Sandboxes.Remove(ctx, scopeOf(rec)); err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	s.forgetWatchers(rec.ID)
	return s.reg.remove(rec.ID)
}

// apiError writes the control API's error body {code, message}.
func apiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody decodes a JSON body of at most 1 MiB.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		apiError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// templateName maps an E2B template to the sandboxctl template that serves
// it: E2B's default "base" is sandboxctl's default template (""), any
// other name one of sandbox.templates.
func (s *Server) templateName(template string) (string, error) {
	switch template {
	case "", "base", sandboxconfig.DefaultTemplate:
		return "", nil
	}
	if s.opts.Templates == nil {
		return "", fmt.Errorf("%w: template %q not found (this server has one template: base)", cerrdefs.ErrNotFound, template)
	}
	if err := s.opts.Templates(template); err != nil {
		return "", fmt.Errorf("%w: %w", cerrdefs.ErrNotFound, err)
	}
	return template, nil
}

// createSandbox makes the container of scope sc: the default template
// through Ensure (which takes it from the warm pool when there is one),
// another, or any under sandbox.explicit (where Ensure makes none), through
// the sandbox manager's Create.
func (s *Server) createSandbox(ctx context.Context, sc sandbox.Scope, template string) error {
	if template == "" {
		_, err := s.opts.Sandboxes.Ensure(ctx, sc)
		if !errors.Is(err, sandbox.ErrNoSandbox) {
			return err
		}
	}
	_, err := s.opts.Sandboxes.Create(ctx, sc, sandbox.CreateOptions{Template: template})
	return err
}

// timeoutOf converts an E2B timeout in seconds (nil: def).
func timeoutOf(sec *int64, def time.Duration) (time.Duration, error) {
	if sec == nil {
		return def, nil
	}
	d := time.Duration(*sec) * time.Second
	if *sec < 0 || d > maxTimeout {
		return 0, fmt.Errorf("timeout must be from 0 to %d seconds", int64(maxTimeout/time.Second))
	}
	return d, nil
}

type createBody struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
}

// sandboxResponse is the answer of create and connect.
type sandboxResponse struct {
	SandboxID       string  `json:"sandboxID"`
	TemplateID      string  `json:"templateID"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          *string `json:"domain"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, agent string) {
	var body createBody
	if !decodeBody(w, r, &body) {
		return
	}
	tmpl, err := s.templateName(body.TemplateID)
	if err != nil {
		apiError(w, http.StatusNotFound, err.Error())
		return
	}
	timeout, err := timeoutOf(body.Timeout, 5*time.Minute)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	template := body.TemplateID
	if template == "" {
		template = "base"
	}
	now := s.opts.Now()
	rec := &record{ID: "i" + newID(10), AgentID: agent, Template: template, Metadata: body.Metadata, Envs: body.EnvVars,
		StartedAt: now, EndAt: now.Add(timeout), EnvdToken: newID(24)}
	// A client that hangs up must not leave a container nobody records:
	// the creation finishes, and the sandbox times out like any other.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), createTimeout)
	defer cancel()
	if err := s.createSandbox(ctx, scopeOf(*rec), tmpl); err != nil {
		code := http.StatusServiceUnavailable
		if cerrdefs.IsResourceExhausted(err) {
			// sandbox.maxPerAgent or sandbox.max: the SDK's RateLimitError.
			code = http.StatusTooManyRequests
		}
		apiError(w, code, "create sandbox: "+err.Error())
		return
	}
	if err := s.reg.add(rec); err != nil {
		_ = s.opts.Sandboxes.Remove(ctx, scopeOf(*rec))
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, s.sandboxResponse(*rec))
}

func (s *Server) sandboxResponse(rec record) sandboxResponse {
	return sandboxResponse{SandboxID: rec.ID, TemplateID: rec.Template, ClientID: "sandboxctl",
		EnvdVersion: envdVersion, EnvdAccessToken: rec.EnvdToken}
}

// listedSandbox is one sandbox of list and info.
type listedSandbox struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
}

func (s *Server) listed(rec record) listedSandbox {
	md := rec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return listedSandbox{SandboxID: rec.ID, TemplateID: rec.Template, ClientID: "sandboxctl", StartedAt: rec.StartedAt, EndAt: rec.EndAt,
		CPUCount: s.opts.CPUCount, MemoryMB: s.opts.MemoryMB, Metadata: md, State: stateOf(rec), EnvdVersion: envdVersion}
}

func stateOf(rec record) string {
	if rec.Paused {
		return "paused"
	}
	return "running"
}

// parseMetadataFilter reads list's metadata query: a URL-encoded query
// string whose keys and values are URL-encoded once more.
func parseMetadataFilter(q string) (map[string]string, error) {
	if q == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, vs := range vals {
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if out[key], err = url.QueryUnescape(v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, agent string) {
	filter, err := parseMetadataFilter(r.URL.Query().Get("metadata"))
	if err != nil {
		apiError(w, http.StatusBadRequest, "metadata: "+err.Error())
		return
	}
	states := r.URL.Query().Get("state")
	out := []listedSandbox{}
	for _, rec := range s.reg.list(agent) {
		match := states == "" || slices.Contains(strings.Split(states, ","), stateOf(rec))
		for k, v := range filter {
			if rec.Metadata[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, s.listed(rec))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request, agent string) {
	rec, ok := s.reg.get(agent, r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "sandbox "+r.PathValue("id")+" not found")
		return
	}
	writeJSON(w, http.StatusOK, s.listed(rec))
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, agent string) {
	rec, ok := s.reg.get(agent, r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "sandbox "+r.PathValue("id")+" not found")
		return
	}
	if err := s.destroy(r.Context(), rec); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, agent string) {
	var body struct {
		Timeout *int64 `json:"timeout"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Timeout == nil {
		apiError(w, http.StatusBadRequest, "timeout is required")
		return
	}
	d, err := timeoutOf(body.Timeout, 0)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !s.reg.setEnd(agent, r.PathValue("id"), s.opts.Now().Add(d)) {
		apiError(w, http.StatusNotFound, "sandbox "+r.PathValue("id")+" not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request, agent string) {
	var body struct {
		Timeout *int64 `json:"timeout"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	id := r.PathValue("id")
	rec, ok := s.reg.get(agent, id)
	if !ok {
		apiError(w, http.StatusNotFound, "sandbox "+id+" not found")
		return
	}
	d, err := timeoutOf(body.Timeout, 5*time.Minute)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if rec.Paused {
		if s.opts.Pauser == nil {
			apiError(w, http.StatusNotImplemented, "resume is not supported by this server")
			return
		}
		if _, err := s.opts.Pauser.Resume(r.Context(), s.containerOf(rec)); err != nil && !cerrdefs.IsConflict(err) {
			apiError(w, http.StatusInternalServerError, "resume: "+err.Error())
			return
		}
		if err := s.reg.setPaused(id, false); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
		rec.EndAt = s.opts.Now() // a resumed sandbox gets its timeout anew
	}
	// Connect never shortens a sandbox's life.
	if end := s.opts.Now().Add(d); end.After(rec.EndAt) {
		s.reg.setEnd(agent, id, end)
	}
	writeJSON(w, http.StatusOK, s.sandboxResponse(rec))
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, agent string) {
	rec, ok := s.reg.get(agent, r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "sandbox "+r.PathValue("id")+" not found")
		return
	}
	if s.opts.Pauser == nil {
		apiError(w, http.StatusNotImplemented, "pause is not supported by this server (sandboxctl pauses idle sandboxes itself: sandbox.pauseAfterMinutes)")
		return
	}
	if rec.Paused {
		apiError(w, http.StatusConflict, "sandbox "+rec.ID+" is already paused")
		return
	}
	if _, err := s.opts.Pauser.Pause(r.Context(), s.containerOf(rec)); err != nil {
		code := http.StatusInternalServerError
		if cerrdefs.IsConflict(err) {
			code = http.StatusConflict
		}
		apiError(w, code, "pause: "+err.Error())
		return
	}
	if err := s.reg.setPaused(rec.ID, true); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connectError classes err for Connect.
func connectError(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(err, api.ErrNoSession), cerrdefs.IsNotFound(err):
		return connect.NewError(connect.CodeNotFound, err)
	case toolapi.IsInvalidInput(err), cerrdefs.IsInvalidArgument(err):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case cerrdefs.IsPermissionDenied(err):
		return connect.NewError(connect.CodePermissionDenied, err)
	case cerrdefs.IsAlreadyExists(err):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}
