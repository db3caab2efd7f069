package guard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Store errors. Callers branch on them with errors.Is.
var (
	ErrCorrupt          = errors.New("approvals file is corrupt")
	ErrUnknownApproval  = errors.New("unknown approval id")
	ErrAmbiguousSlug    = errors.New("approval slug matches more than one request")
	ErrExpired          = errors.New("approval request expired")
	ErrAlreadyDecided   = errors.New("approval request already decided")
	ErrAlreadyConsumed  = errors.New("approval already used")
	ErrCancelled        = errors.New("approval request cancelled")
	ErrBindingMismatch  = errors.New("approval does not match this command")
	ErrInvalidRequest   = errors.New("invalid approval request")
	ErrUnknownAllowlist = errors.New("unknown allowlist entry")
)

// DefaultApprovalTimeout is how long a request waits for a human.
const DefaultApprovalTimeout = 120 * time.Second

// PendingRequest is what the exec flow asks a human about.
type PendingRequest struct {
	Command    string   // the full command line, never truncated
	Argv       []string // the exact argv that will be executed (e.g. [/bin/bash -c <Verdict.Command>])
	Cwd        string
	Host       vocab.Host // gateway | node
	NodeID     string
	Security   vocab.Security
	Ask        vocab.Ask
	AgentID    string
	SessionKey string
	EnvHash    string // EnvHash of the request env
	// Env is the request env, names and values: what the command gets on
	// top of the host's base environment. A human must see it.
	Env           map[string]string
	ResolvedPaths []string // PersistablePaths(analysis): what allow-always may add
	Explain       string   // Analysis.Explain(), for the human
	// Timeout overrides the store's timeout for this request when > 0.
	Timeout time.Duration
}

// Pending is a stored approval request and its state.
type Pending struct {
	ID            string                 `json:"id"`
	Slug          string                 `json:"slug"`
	Command       string                 `json:"command"`
	Argv          []string               `json:"argv"`
	Cwd           string                 `json:"cwd"`
	Host          vocab.Host             `json:"host,omitempty"`
	NodeID        string                 `json:"nodeId,omitempty"`
	Security      vocab.Security         `json:"security,omitempty"`
	Ask           vocab.Ask              `json:"ask,omitempty"`
	AgentID       string                 `json:"agentId,omitempty"`
	SessionKey    string                 `json:"sessionKey,omitempty"`
	EnvHash       string                 `json:"envHash"`
	Env           map[string]string      `json:"env,omitempty"`
	ResolvedPaths []string               `json:"resolvedPaths,omitempty"`
	Explain       string                 `json:"explain,omitempty"`
	CreatedAtMs   int64                  `json:"createdAtMs"`
	ExpiresAtMs   int64                  `json:"expiresAtMs"`
	Decision      vocab.ApprovalDecision `json:"decision,omitempty"`
	DecidedAtMs   int64                  `json:"decidedAtMs,omitempty"`
	Consumed      bool                   `json:"consumed,omitempty"`
	// SessionIDs are the daemon sessions that wait on the request
	// (AttachSession): what a restarted daemon reports as failed when it
	// cancels the request.
	SessionIDs []string `json:"sessionIds,omitempty"`
	// Cancelled, when set, says why the request can no longer be decided
	// or used (CancelUnused): it is used up, never runs anything.
	Cancelled string `json:"cancelled,omitempty"`
}

// View is p as a human is shown it (api.ApprovalRequest), with its
// status at now.
func (p Pending) View(now time.Time) api.ApprovalRequest {
	return api.ApprovalRequest{
		ID: p.ID, Slug: p.Slug, Command: p.Command, Argv: p.Argv, Env: p.Env, Cwd: p.Cwd,
		AgentID: p.AgentID, SessionKey: p.SessionKey, Explain: p.Explain,
		CreatedAtMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs, Status: p.Status(now),
	}
}

// Status is "pending", "expired", a decision, "<decision> (used)" or
// "cancelled".
func (p Pending) Status(now time.Time) string {
	switch {
	case p.Cancelled != "":
		return "cancelled"
	case p.Decision != "" && p.Consumed:
		return string(p.Decision) + " (used)"
	case p.Decision != "":
		return string(p.Decision)
	case now.UnixMilli() >= p.ExpiresAtMs:
		return "expired"
	}
	return "pending"
}

// Binding is what an approval is bound to. All fields must equal the
// request's exactly.
type Binding struct {
	Command    string
	Argv       []string
	Cwd        string
	AgentID    string
	SessionKey string
	EnvHash    string
}

// Outcome of Check/Consume.
type Outcome string

// Outcomes.
const (
	OutcomePending  Outcome = "pending"  // no decision yet, not expired
	OutcomeAllow    Outcome = "allow"    // allow-once or allow-always
	OutcomeDeny     Outcome = "deny"     // a human denied it
	OutcomeFallback Outcome = "fallback" // expired undecided: apply Policy.Fallback
)

// CheckResult is the answer of Check/Consume.
type CheckResult struct {
	Outcome  Outcome
	Decision vocab.ApprovalDecision
	Request  Pending
}

// Defaults are the file-level defaults (OpenClaw's "defaults" block).
type Defaults struct {
	Security    vocab.Security `json:"security,omitempty"`
	Ask         vocab.Ask      `json:"ask,omitempty"`
	AskFallback vocab.Security `json:"askFallback,omitempty"`
}

// AgentState is one agent's block; "*" applies to every agent.
type AgentState struct {
	Allowlist []Entry `json:"allowlist"`
}

type fileState struct {
	Version   int                    `json:"version"`
	Socket    json.RawMessage        `json:"socket,omitempty"` // OpenClaw compatibility, kept as is
	Defaults  Defaults               `json:"defaults"`
	Agents    map[string]*AgentState `json:"agents"`
	Approvals []*Pending             `json:"approvals,omitempty"`
}

// Store is approvals.json: allowlists per agent and approval requests. It is
// safe for concurrent use by goroutines (a mutex) and processes (flock on
// approvals.json.lock). Every operation re-reads the file under the lock,
// so a decision written by another process is seen at once.
type Store struct {
	path    string
	now     func() time.Time
	timeout time.Duration
	keep    time.Duration
	lim     StoreLimits
	mu      sync.Mutex
	// cache is the state last read or written, valid while the file's
	// identity (inode, size, mtime) is cacheKey: a poll or an allowlist
	// lookup does not parse the whole file again when nothing changed.
	cache    *fileState
	cacheKey fileKey
	parses   int // times the file was read and parsed (tests)
}

// fileKey identifies one version of approvals.json: every write replaces
// the file (a new inode), and an edit in place changes size or mtime.
type fileKey struct {
	dev, ino, size, mtime int64
}

func statKey(path string) (fileKey, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileKey{}, false
	}
	return fileKey{dev: int64(st.Dev), ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano()}, true
}

// StoreOption configures OpenStore.
type StoreOption func(*Store) error

// WithNow injects the clock (tests).
func WithNow(now func() time.Time) StoreOption {
	return func(s *Store) error {
		if now == nil {
			return errors.New("WithNow: nil clock")
		}
		s.now = now
		return nil
	}
}

// WithTimeout sets how long requests wait for a decision (default 120 s).
func WithTimeout(d time.Duration) StoreOption {
	return func(s *Store) error {
		if d <= 0 {
			return fmt.Errorf("WithTimeout: %v is not positive", d)
		}
		s.timeout = d
		return nil
	}
}

// OpenStore opens (without creating) approvals.json at path. A missing file
// is an empty store, created on first write. A corrupt file is an error
// wrapping ErrCorrupt and is never reset or rewritten.
func OpenStore(path string, opts ...StoreOption) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("open approvals store: empty path: %w", ErrInvalidRequest)
	}
	s := &Store{path: path, now: time.Now, timeout: DefaultApprovalTimeout, keep: 24 * time.Hour, lim: DefaultStoreLimits()}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, fmt.Errorf("open approvals store: %w", err)
		}
	}
	if _, err := s.readFile(); err != nil {
		return nil, fmt.Errorf("open approvals store: %w", err)
	}
	return s, nil
}

// Path is the file's path.
func (s *Store) Path() string { return s.path }

// read returns the current state: the cached one while the file is the
// version it was read from or written as, else the file parsed again.
// Callers hold s.mu; a caller that changes the state writes it or drops
// the cache (update does both).
func (s *Store) read() (*fileState, error) {
	key, ok := statKey(s.path)
	if ok && s.cache != nil && key == s.cacheKey {
		return s.cache, nil
	}
	s.cache = nil
	st, err := s.readFile()
	if err == nil && ok {
		if again, ok2 := statKey(s.path); ok2 && again == key {
			s.cache, s.cacheKey = st, key
		}
	}
	return st, err
}

func (s *Store) readFile() (*fileState, error) {
	s.parses++
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &fileState{Version: 1, Agents: map[string]*AgentState{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", s.path, ErrCorrupt, err)
	}
	return st, nil
}

func decodeState(data []byte) (*fileState, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st fileState
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object")
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("version %d (want 1)", st.Version)
	}
	if st.Defaults.Security != "" && !st.Defaults.Security.Valid() {
		return nil, fmt.Errorf("defaults.security %q", st.Defaults.Security)
	}
	if st.Defaults.Ask != "" && !st.Defaults.Ask.Valid() {
		return nil, fmt.Errorf("defaults.ask %q", st.Defaults.Ask)
	}
	if st.Defaults.AskFallback != "" && !st.Defaults.AskFallback.Valid() {
		return nil, fmt.Errorf("defaults.askFallback %q", st.Defaults.AskFallback)
	}
	if st.Agents == nil {
		st.Agents = map[string]*AgentState{}
	}
	for id, a := range st.Agents {
		if a == nil {
			return nil, fmt.Errorf("agents[%q] is null", id)
		}
		for i, e := range a.Allowlist {
			if err := ValidatePattern(e.Pattern); err != nil {
				return nil, fmt.Errorf("agents[%q].allowlist[%d]: %w", id, i, err)
			}
		}
	}
	seen := map[string]bool{}
	for i, p := range st.Approvals {
		if p == nil || p.ID == "" || seen[p.ID] {
			return nil, fmt.Errorf("approvals[%d]: missing or duplicate id", i)
		}
		seen[p.ID] = true
		if p.Decision != "" {
			if _, err := vocab.ParseApprovalDecision(string(p.Decision)); err != nil {
				return nil, fmt.Errorf("approvals[%d]: %w", i, err)
			}
		}
	}
	return &st, nil
}

// update runs fn on the current state under both locks and writes the
// result atomically when fn reports a change.
func (s *Store) update(ctx context.Context, fn func(st *fileState) (bool, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.flock()
	if err != nil {
		return err
	}
	defer unlock()
	st, err := s.read()
	if err != nil {
		return err
	}
	changed, err := fn(st)
	if err != nil {
		s.cache = nil // fn may have changed st before it failed
		return err
	}
	if !changed {
		return nil
	}
	s.prune(st)
	s.cache = nil
	if err := s.write(st); err != nil {
		return err
	}
	if key, ok := statKey(s.path); ok {
		s.cache, s.cacheKey = st, key
	}
	return nil
}

func (s *Store) flock() (func(), error) {
	f, err := os.OpenFile(s.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("approvals lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("approvals lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// prune drops requests that are finished (used, or expired) for longer than
// s.keep, then the oldest finished ones beyond s.lim.Retained.
func (s *Store) prune(st *fileState) {
	now := s.now()
	cut := now.Add(-s.keep).UnixMilli()
	st.Approvals = slices.DeleteFunc(st.Approvals, func(p *Pending) bool {
		done := p.Consumed || p.Decision == vocab.DenyOnce || (p.Decision == "" && p.ExpiresAtMs < cut)
		last := max(p.ExpiresAtMs, p.DecidedAtMs)
		return done && last < cut
	})
	s.pruneRetained(st, now)
}

func (s *Store) write(st *fileState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode approvals: %w", err)
	}
	data = append(data, '\n')
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("write approvals: %w", err)
	}
	return nil
}

func agentKey(id string) string {
	if id == "" {
		return "default"
	}
	return id
}

// Request stores a new pending approval request and returns it (id is a
// UUID, slug its first 8 characters, expiry now + timeout).
func (s *Store) Request(ctx context.Context, req PendingRequest) (Pending, error) {
	if strings.TrimSpace(req.Command) == "" {
		return Pending{}, fmt.Errorf("approval request: empty command: %w", ErrInvalidRequest)
	}
	if len(req.Argv) == 0 {
		return Pending{}, fmt.Errorf("approval request: empty argv: %w", ErrInvalidRequest)
	}
	if req.Cwd == "" || !filepath.IsAbs(req.Cwd) {
		return Pending{}, fmt.Errorf("approval request: cwd %q is not absolute: %w", req.Cwd, ErrInvalidRequest)
	}
	if req.Security != "" && !req.Security.Valid() {
		return Pending{}, fmt.Errorf("approval request: %w", &vocab.ModeError{Kind: "security", Value: string(req.Security), Valid: []string{"deny", "allowlist", "full"}})
	}
	if req.Ask != "" && !req.Ask.Valid() {
		return Pending{}, fmt.Errorf("approval request: %w", &vocab.ModeError{Kind: "ask", Value: string(req.Ask), Valid: []string{"off", "on-miss", "always"}})
	}
	timeout := s.timeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	id := uuid.NewString()
	now := s.now()
	p := Pending{
		ID: id, Slug: id[:8], Command: req.Command, Argv: slices.Clone(req.Argv), Cwd: req.Cwd,
		Host: req.Host, NodeID: req.NodeID, Security: req.Security, Ask: req.Ask, AgentID: req.AgentID,
		SessionKey: req.SessionKey, EnvHash: req.EnvHash, Env: maps.Clone(req.Env), ResolvedPaths: slices.Clone(req.ResolvedPaths),
		Explain: req.Explain, CreatedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(timeout).UnixMilli(),
	}
	if n := requestBytes(req); n > s.lim.RequestBytes {
		return Pending{}, fmt.Errorf("approval request: the command and its environment are %d bytes, over the limit of %d bytes (limits.approvals.requestBytes): %w", n, s.lim.RequestBytes, ErrApprovalTooLarge)
	}
	err := s.update(ctx, func(st *fileState) (bool, error) {
		if err := s.checkPendingQuota(st, req.AgentID, now); err != nil {
			return false, err
		}
		cp := p
		st.Approvals = append(st.Approvals, &cp)
		return true, nil
	})
	if err != nil {
		return Pending{}, fmt.Errorf("approval request: %w", err)
	}
	return p, nil
}

func find(st *fileState, idOrSlug string) (*Pending, error) {
	if idOrSlug == "" {
		return nil, fmt.Errorf("empty approval id: %w", ErrUnknownApproval)
	}
	var hits []*Pending
	for _, p := range st.Approvals {
		if p.ID == idOrSlug {
			return p, nil
		}
		if p.Slug == idOrSlug {
			hits = append(hits, p)
		}
	}
	switch len(hits) {
	case 0:
		return nil, fmt.Errorf("%q: %w", idOrSlug, ErrUnknownApproval)
	case 1:
		return hits[0], nil
	}
	return nil, fmt.Errorf("%q: %w; use the full id", idOrSlug, ErrAmbiguousSlug)
}

// Resolve records a human decision for the request with this id or slug.
// allow-always also appends each resolved executable of the request to the
// agent's allowlist — never a shell, wrapper, carrier or interpreter.
func (s *Store) Resolve(ctx context.Context, idOrSlug string, d vocab.ApprovalDecision) error {
	if _, err := vocab.ParseApprovalDecision(string(d)); err != nil {
		return fmt.Errorf("resolve approval: %w", err)
	}
	err := s.update(ctx, func(st *fileState) (bool, error) {
		p, err := find(st, idOrSlug)
		if err != nil {
			return false, err
		}
		if p.Cancelled != "" {
			return false, fmt.Errorf("%s was cancelled (%s): %w", p.ID, p.Cancelled, ErrCancelled)
		}
		if p.Decision != "" {
			return false, fmt.Errorf("%s was already decided %s: %w", p.ID, p.Decision, ErrAlreadyDecided)
		}
		now := s.now()
		if now.UnixMilli() >= p.ExpiresAtMs {
			return false, fmt.Errorf("%s expired at %s: %w", p.ID, time.UnixMilli(p.ExpiresAtMs).UTC().Format(time.RFC3339), ErrExpired)
		}
		p.Decision, p.DecidedAtMs = d, now.UnixMilli()
		if d == vocab.AllowAlways {
			key := agentKey(p.AgentID)
			a := st.Agents[key]
			if a == nil {
				a = &AgentState{}
				st.Agents[key] = a
			}
			for _, rp := range p.ResolvedPaths {
				if !persistable(rp) || slices.ContainsFunc(a.Allowlist, func(e Entry) bool { return e.Pattern == rp }) {
					continue
				}
				head, _, _ := ParsePattern(rp)
				a.Allowlist = append(a.Allowlist, Entry{ID: uuid.NewString(), Pattern: rp, LastUsedAt: now.UnixMilli(), LastUsedCommand: p.Command, LastResolvedPath: head})
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("resolve approval: %w", err)
	}
	return nil
}

func persistable(p string) bool {
	head, _, err := ParsePattern(p)
	if err != nil || !filepath.IsAbs(head) || IsShellOrWrapper(head) {
		return false
	}
	spec, ok := gadgetSpecFor(filepath.Base(head))
	return !ok || spec.always == ""
}

// PersistablePaths returns the allowlist patterns allow-always may add for
// an analysis: passed segments only, never a builtin, shell, wrapper,
// carrier or interpreter, nor a program whose every use runs code (Gadget).
// A program with command-running options (ArgvMatched) is persisted as an
// argv pattern, its resolved path plus the exact arguments
// (`/usr/bin/git status`), and not at all when its argv carries a gadget or
// has no arguments; any other program as its resolved path.
func PersistablePaths(a Analysis) []string {
	var out []string
	for _, s := range a.Segments {
		if !s.OK() || s.Builtin || s.Resolved == "" || !persistable(s.Resolved) {
			continue
		}
		names := segmentNames(s)
		p := s.Resolved
		if ArgvMatched(names...) {
			if g, _ := Gadget(s.Argv, false, names...); g != "" || len(s.Argv) < 2 {
				continue
			}
			var ok bool
			if p, ok = FormatArgvPattern(s.Resolved, s.Argv[1:]); !ok {
				continue
			}
		}
		if !persistable(p) || slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func checkBinding(p *Pending, b Binding) error {
	var diff []string
	if p.Command != b.Command {
		diff = append(diff, "command")
	}
	if !slices.Equal(p.Argv, b.Argv) {
		diff = append(diff, "argv")
	}
	if p.Cwd != b.Cwd {
		diff = append(diff, "cwd")
	}
	if p.AgentID != b.AgentID {
		diff = append(diff, "agent")
	}
	if p.SessionKey != b.SessionKey {
		diff = append(diff, "session key")
	}
	if p.EnvHash != b.EnvHash {
		diff = append(diff, "env")
	}
	if len(diff) > 0 {
		return fmt.Errorf("%s: %s differ: %w", p.ID, strings.Join(diff, ", "), ErrBindingMismatch)
	}
	return nil
}

func (s *Store) outcome(p *Pending) CheckResult {
	r := CheckResult{Request: *p, Decision: p.Decision}
	switch {
	case p.Cancelled != "":
		r.Outcome = OutcomeDeny
	case p.Decision == vocab.AllowOnce || p.Decision == vocab.AllowAlways:
		r.Outcome = OutcomeAllow
	case p.Decision == vocab.DenyOnce:
		r.Outcome = OutcomeDeny
	case s.now().UnixMilli() >= p.ExpiresAtMs:
		r.Outcome = OutcomeFallback
	default:
		r.Outcome = OutcomePending
	}
	return r
}

// Check reports the state of a request for the given binding without using
// it up. A binding that differs in command, argv, cwd, agent, session key
// or env hash is ErrBindingMismatch.
func (s *Store) Check(ctx context.Context, id string, b Binding) (CheckResult, error) {
	var r CheckResult
	err := s.update(ctx, func(st *fileState) (bool, error) {
		p, err := find(st, id)
		if err != nil {
			return false, err
		}
		if err := checkBinding(p, b); err != nil {
			return false, err
		}
		r = s.outcome(p)
		return false, nil
	})
	if err != nil {
		return CheckResult{}, fmt.Errorf("check approval: %w", err)
	}
	return r, nil
}

// Consume is Check for the moment of execution: a final outcome (allow,
// deny, fallback) marks the request used, so an approval runs its command
// once; a second Consume is ErrAlreadyConsumed. A pending request is
// returned as OutcomePending and left alone.
func (s *Store) Consume(ctx context.Context, id string, b Binding) (CheckResult, error) {
	var r CheckResult
	err := s.update(ctx, func(st *fileState) (bool, error) {
		p, err := find(st, id)
		if err != nil {
			return false, err
		}
		if err := checkBinding(p, b); err != nil {
			return false, err
		}
		if p.Consumed {
			return false, fmt.Errorf("%s: %w", p.ID, ErrAlreadyConsumed)
		}
		r = s.outcome(p)
		if r.Outcome == OutcomePending {
			return false, nil
		}
		p.Consumed = true
		if p.DecidedAtMs == 0 {
			p.DecidedAtMs = s.now().UnixMilli()
		}
		r.Request = *p
		return true, nil
	})
	if err != nil {
		return CheckResult{}, fmt.Errorf("consume approval: %w", err)
	}
	return r, nil
}

// Wait polls Check every interval until the request is decided or expired,
// or ctx ends.
func (s *Store) Wait(ctx context.Context, id string, b Binding, interval time.Duration) (CheckResult, error) {
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r, err := s.Check(ctx, id, b)
		if err != nil || r.Outcome != OutcomePending {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-t.C:
		}
	}
}

// AttachSession records that session sessionID waits on request id.
func (s *Store) AttachSession(ctx context.Context, id, sessionID string) error {
	err := s.update(ctx, func(st *fileState) (bool, error) {
		p, err := find(st, id)
		if err != nil {
			return false, err
		}
		if slices.Contains(p.SessionIDs, sessionID) {
			return false, nil
		}
		p.SessionIDs = append(p.SessionIDs, sessionID)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("attach session to approval: %w", err)
	}
	return nil
}

// CancelUnused cancels, with reason, every request not used yet — pending,
// expired or decided: a daemon that starts calls it, because whatever
// waited on them died with the previous one. A cancelled request cannot be
// decided (ErrCancelled) and no later identical request uses it: an
// allow-once given after the crash runs nothing, ever. It returns the
// requests it cancelled.
func (s *Store) CancelUnused(ctx context.Context, reason string) ([]Pending, error) {
	var out []Pending
	err := s.update(ctx, func(st *fileState) (bool, error) {
		now := s.now().UnixMilli()
		for _, p := range st.Approvals {
			if p.Consumed || p.Cancelled != "" {
				continue
			}
			p.Cancelled, p.Consumed = reason, true
			if p.DecidedAtMs == 0 {
				p.DecidedAtMs = now
			}
			out = append(out, *p)
		}
		return len(out) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("cancel unused approvals: %w", err)
	}
	return out, nil
}

// List returns every stored request, newest first.
func (s *Store) List(ctx context.Context) ([]Pending, error) {
	var out []Pending
	err := s.update(ctx, func(st *fileState) (bool, error) {
		for _, p := range st.Approvals {
			out = append(out, *p)
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAtMs > out[j].CreatedAtMs })
	return out, nil
}

// Defaults returns the file's defaults block.
func (s *Store) Defaults(ctx context.Context) (Defaults, error) {
	var d Defaults
	err := s.update(ctx, func(st *fileState) (bool, error) { d = st.Defaults; return false, nil })
	return d, err
}

// SetDefaults validates and stores the defaults block.
func (s *Store) SetDefaults(ctx context.Context, d Defaults) error {
	if d.Security != "" {
		if _, err := vocab.ParseSecurity(string(d.Security)); err != nil {
			return fmt.Errorf("set defaults: %w", err)
		}
	}
	if d.Ask != "" {
		if _, err := vocab.ParseAsk(string(d.Ask)); err != nil {
			return fmt.Errorf("set defaults: %w", err)
		}
	}
	if _, err := vocab.ParseAskFallback(string(d.AskFallback)); err != nil {
		return fmt.Errorf("set defaults: %w", err)
	}
	return s.update(ctx, func(st *fileState) (bool, error) { st.Defaults = d; return true, nil })
}

// Allowlist returns the entries that apply to an agent: its own, then "*".
func (s *Store) Allowlist(ctx context.Context, agentID string) ([]Entry, error) {
	var out []Entry
	err := s.update(ctx, func(st *fileState) (bool, error) {
		for _, k := range []string{agentKey(agentID), "*"} {
			if a := st.Agents[k]; a != nil {
				out = append(out, a.Allowlist...)
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	return out, nil
}

// AddAllowlist validates pattern and adds it to the agent's allowlist ("*"
// for every agent). Adding an existing pattern returns the existing entry.
func (s *Store) AddAllowlist(ctx context.Context, agentID, pattern string) (Entry, error) {
	if err := ValidatePattern(pattern); err != nil {
		return Entry{}, fmt.Errorf("add allowlist entry: %w", err)
	}
	var e Entry
	err := s.update(ctx, func(st *fileState) (bool, error) {
		key := agentKey(agentID)
		a := st.Agents[key]
		if a == nil {
			a = &AgentState{}
			st.Agents[key] = a
		}
		if i := slices.IndexFunc(a.Allowlist, func(x Entry) bool { return x.Pattern == pattern }); i >= 0 {
			e = a.Allowlist[i]
			return false, nil
		}
		e = Entry{ID: uuid.NewString(), Pattern: pattern}
		a.Allowlist = append(a.Allowlist, e)
		return true, nil
	})
	if err != nil {
		return Entry{}, fmt.Errorf("add allowlist entry: %w", err)
	}
	return e, nil
}

// RemoveAllowlist removes an entry by id from the agent's allowlist.
func (s *Store) RemoveAllowlist(ctx context.Context, agentID, entryID string) error {
	err := s.update(ctx, func(st *fileState) (bool, error) {
		a := st.Agents[agentKey(agentID)]
		if a == nil {
			return false, fmt.Errorf("%q: %w", entryID, ErrUnknownAllowlist)
		}
		n := len(a.Allowlist)
		a.Allowlist = slices.DeleteFunc(a.Allowlist, func(e Entry) bool { return e.ID == entryID })
		if len(a.Allowlist) == n {
			return false, fmt.Errorf("%q: %w", entryID, ErrUnknownAllowlist)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("remove allowlist entry: %w", err)
	}
	return nil
}

// RecordUse stores usage metadata (lastUsedAt, lastUsedCommand,
// lastResolvedPath) on every allowlist entry a verdict hit.
func (s *Store) RecordUse(ctx context.Context, agentID string, hits []Hit, command string) error {
	if len(hits) == 0 {
		return nil
	}
	err := s.update(ctx, func(st *fileState) (bool, error) {
		changed := false
		now := s.now().UnixMilli()
		for _, k := range []string{agentKey(agentID), "*"} {
			a := st.Agents[k]
			if a == nil {
				continue
			}
			for i := range a.Allowlist {
				for _, h := range hits {
					if a.Allowlist[i].ID == h.EntryID {
						a.Allowlist[i].LastUsedAt = now
						a.Allowlist[i].LastUsedCommand = command
						a.Allowlist[i].LastResolvedPath = h.ResolvedPath
						changed = true
					}
				}
			}
		}
		return changed, nil
	})
	if err != nil {
		return fmt.Errorf("record allowlist use: %w", err)
	}
	return nil
}

// EnvHash is a stable digest of a request's environment (sorted keys,
// length-prefixed keys and values), used to bind approvals to it.
func EnvHash(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s=%d:%s;", len(k), k, len(env[k]), env[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
