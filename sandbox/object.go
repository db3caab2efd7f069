package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// Sandboxes as objects (docs/sandboxes.md): created for a scope from a
// template, with labels and a TTL, listed with filters, paused, resumed,
// extended and deleted by id. A sandbox's id is its container's id (a
// unique prefix or its name select it too).

// Labels of a sandbox created as an object.
const (
	// LabelTemplate names the template it was made from (absent: the default).
	LabelTemplate = "sandboxctl.template"
	// LabelUserPrefix prefixes the labels given at creation.
	LabelUserPrefix = "sandboxctl.label."
	// LabelExpiresAt is the expiry given at creation (Unix ms); an extension
	// is kept in the state directory (expiryFile).
	LabelExpiresAt = "sandboxctl.expiresAtMs"
)

// Bounds of the input of CreateOptions.
const (
	// MaxTTL is the longest TTL a sandbox may be given.
	MaxTTL = 30 * 24 * time.Hour
	// MaxLabels is how many labels a sandbox may carry.
	MaxLabels = 32
	// MaxLabelValue is the longest label value (bytes).
	MaxLabelValue = 256
)

// ErrPaused classes a command for a sandbox paused on request (Pause): it
// does not run until the sandbox is resumed.
var ErrPaused = fmt.Errorf("%w: sandbox paused", cerrdefs.ErrConflict)

// errBadInput classes a request the lifecycle refuses before it changes
// anything.
var errBadInput = cerrdefs.ErrInvalidArgument

var labelKey = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)

// CheckLabel checks one label given at creation.
func CheckLabel(k, v string) error {
	if !labelKey.MatchString(k) {
		return fmt.Errorf("%w: label key %q: want 1-63 letters, digits, '.', '_', '/' and '-', starting and ending with a letter or digit", errBadInput, k)
	}
	if len(v) > MaxLabelValue {
		return fmt.Errorf("%w: label %s: the value has %d bytes, at most %d", errBadInput, k, len(v), MaxLabelValue)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: label %s: the value holds a control character", errBadInput, k)
		}
	}
	return nil
}

// CheckTTL checks a TTL in seconds (0: none when zeroOK).
func CheckTTL(seconds int64, zeroOK bool) (time.Duration, error) {
	max := int64(MaxTTL / time.Second)
	switch {
	case seconds < 0 || seconds > max:
		return 0, fmt.Errorf("%w: ttlSeconds %d: want 1 to %d (%s)", errBadInput, seconds, max, MaxTTL)
	case seconds == 0 && !zeroOK:
		return 0, fmt.Errorf("%w: ttlSeconds must be at least 1", errBadInput)
	}
	return time.Duration(seconds) * time.Second, nil
}

// CreateOptions is what a sandbox is created with.
type CreateOptions struct {
	Template string            // "" : the default template
	Labels   map[string]string // stored as container labels under LabelUserPrefix
	TTL      time.Duration     // 0: none; else removed once it passed
}

func (o CreateOptions) check(cfg Config) error {
	if _, err := cfg.TemplateDocker(o.Template); err != nil {
		return fmt.Errorf("%w: %w", errBadInput, err)
	}
	if len(o.Labels) > MaxLabels {
		return fmt.Errorf("%w: %d labels, at most %d", errBadInput, len(o.Labels), MaxLabels)
	}
	for k, v := range o.Labels {
		if err := CheckLabel(k, v); err != nil {
			return err
		}
	}
	if o.TTL < 0 || o.TTL > MaxTTL {
		return fmt.Errorf("%w: ttl %s: want at most %s", errBadInput, o.TTL, MaxTTL)
	}
	return nil
}

// Create makes the sandbox of scope s from a template, with labels and a
// TTL, and returns it. A scope that has a sandbox already is a conflict;
// bad options are an invalid-argument error and change nothing.
func (m *DockerEngine) Create(ctx context.Context, s Scope, o CreateOptions) (Info, error) {
	if err := o.check(m.cfg); err != nil {
		return Info{}, err
	}
	scopeKey := ScopeKey(m.cfg.Scope, s)
	lock := m.scopeLock(scopeKey)
	lock.Lock()
	defer lock.Unlock()
	return m.createLocked(ctx, s, o)
}

// createLocked is Create under the scope's lock, with o checked.
func (m *DockerEngine) createLocked(ctx context.Context, s Scope, o CreateOptions) (Info, error) {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	name := ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	exists := func() error {
		return fmt.Errorf("%w: scope %s has a sandbox already (%s): use it, or remove it first (sandboxctl sandbox rm %s)", cerrdefs.ErrConflict, scopeKey, name, name)
	}
	_, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		return Info{}, exists()
	case !isNotFound(err):
		return Info{}, m.classify("inspect sandbox "+name, err)
	}
	extra := map[string]string{}
	if o.Template != "" && o.Template != sandboxconfig.DefaultTemplate {
		extra[LabelTemplate] = o.Template
	}
	for k, v := range o.Labels {
		extra[LabelUserPrefix+k] = v
	}
	if o.TTL > 0 {
		extra[LabelExpiresAt] = strconv.FormatInt(m.now().Add(o.TTL).UnixMilli(), 10)
	}
	sh := m.shapeOf(scopeKey, name, o.Template)
	hash, canonical := configHash(sh)
	release, err := m.admit(ctx, s, name)
	if err != nil {
		return Info{}, err
	}
	// A pooled sandbox of the template serves it when one is ready: its
	// container carries the template; the labels go in its claim and the
	// TTL in its record (setExpiry), as an extension's would.
	mem, pooled, err := m.takePooled(ctx, s, scopeKey, name, sh, o.Template, o.Labels)
	if err == nil && m.obs != nil && m.poolSize(templateOrDefault(o.Template)) > 0 {
		m.obs.WarmPool(pooled)
	}
	if err == nil && pooled && o.TTL > 0 {
		if err = m.setExpiry(name, mem.id, m.now().Add(o.TTL)); err != nil {
			_ = m.removeID(context.WithoutCancel(ctx), mem.id)
			m.forgetPooled(mem.id, map[string]string{LabelPooled: "1", LabelPoolDir: mem.dir})
		}
	}
	if err != nil || pooled {
		release()
		if isConflict(err) {
			return Info{}, exists()
		}
		if err != nil {
			return Info{}, err
		}
		m.reg.touch(name, scopeKey)
		return m.Get(ctx, mem.id)
	}
	start := time.Now()
	endStep := m.step(s, StepSandboxCreate)
	id, _, _, err := m.create(ctx, s, scopeKey, name, sh, hash, canonical, extra)
	endStep(err)
	release()
	if isConflict(err) {
		return Info{}, exists()
	}
	if err != nil {
		return Info{}, err
	}
	if m.obs != nil {
		m.obs.SandboxCreated(time.Since(start))
	}
	m.reg.touch(name, scopeKey)
	return m.Get(ctx, id)
}

// ListFilter selects sandboxes of List; zero fields select all.
type ListFilter struct {
	Labels   map[string]string
	AgentID  string
	Template string
	State    string
	// ScopeKey selects the sandbox serving one scope (ScopeKey).
	ScopeKey string
}

// ParseListFilter parses docker-style filters: label=K=V (or label=K: has
// the label), agent=ID, template=NAME, state=STATE, scopeKey=KEY.
func ParseListFilter(filters []string) (ListFilter, error) {
	f := ListFilter{Labels: map[string]string{}}
	for _, s := range filters {
		key, val, ok := strings.Cut(s, "=")
		if !ok || val == "" {
			return f, fmt.Errorf("%w: filter %q: want label=KEY=VALUE, agent=ID, template=NAME or state=STATE", errBadInput, s)
		}
		switch key {
		case "label":
			k, v, _ := strings.Cut(val, "=")
			if err := CheckLabel(k, v); err != nil {
				return f, err
			}
			f.Labels[k] = v
		case "agent", "agentId":
			f.AgentID = val
		case "template":
			f.Template = val
		case "scopeKey":
			f.ScopeKey = val
		case "state":
			if !knownState(val) {
				return f, fmt.Errorf("%w: filter state=%s: want one of %s", errBadInput, val, strings.Join(SandboxStates[:len(SandboxStates)-1], ", "))
			}
			f.State = val
		default:
			return f, fmt.Errorf("%w: filter %q: unknown key %q (label, agent, template, state)", errBadInput, s, key)
		}
	}
	return f, nil
}

func knownState(s string) bool {
	for _, st := range SandboxStates[:len(SandboxStates)-1] {
		if st == s {
			return true
		}
	}
	return false
}

// Match reports whether in passes the filter. A label filter with an
// empty value asks only that the label is set.
func (f ListFilter) Match(in Info) bool {
	if f.AgentID != "" && in.AgentID != f.AgentID {
		return false
	}
	if f.Template != "" && in.Template != f.Template {
		return false
	}
	if f.State != "" && in.State != f.State {
		return false
	}
	if f.ScopeKey != "" && in.ScopeKey != f.ScopeKey {
		return false
	}
	for k, v := range f.Labels {
		got, ok := in.Labels[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// filterInfos keeps the sandboxes of list that f matches.
func filterInfos(list []Info, f ListFilter) []Info {
	out := list[:0]
	for _, in := range list {
		if f.Match(in) {
			out = append(out, in)
		}
	}
	return out
}

// Get returns the sandbox whose id, unique id prefix (4 characters at
// least) or name is ref; ErrNotFound when none.
func (m *DockerEngine) Get(ctx context.Context, ref string) (Info, error) {
	list, err := m.List(ctx)
	if err != nil {
		return Info{}, err
	}
	return findRef(list, ref)
}

// findRef is the sandbox of list whose id, unique id prefix (4 characters
// at least) or name is ref; ErrNotFound when none.
func findRef(list []Info, ref string) (Info, error) {
	var found []Info
	for _, in := range list {
		switch {
		case in.ID == ref || in.Name == ref:
			return in, nil
		case len(ref) >= 4 && strings.HasPrefix(in.ID, ref):
			found = append(found, in)
		}
	}
	switch len(found) {
	case 0:
		return Info{}, fmt.Errorf("%w: no sandbox with id or name %q (sandboxctl sandbox ls shows them)", ErrNotFound, ref)
	case 1:
		return found[0], nil
	}
	return Info{}, fmt.Errorf("%w: id prefix %q matches %d sandboxes; give more of the id", errBadInput, ref, len(found))
}

// Delete removes the sandbox ref (see Get) and, with workspace, its
// workspace directories on the host, and returns what it removed.
func (m *DockerEngine) Delete(ctx context.Context, ref string, workspace bool) (Info, error) {
	in, err := m.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	if workspace {
		if q, _ := m.cfg.WorkspaceQuotaBytes(); q > 0 {
			return in, fmt.Errorf("%w: removing the workspace with its sandbox is not supported with sandbox.workspaceQuota (a mounted volume) yet", errBadInput)
		}
		if in.Pool == PoolReady {
			return in, fmt.Errorf("%w: sandbox %s is a warm-pool sandbox: it has no agent workspace", errBadInput, in.Name)
		}
	}
	lock := m.scopeLock(in.ScopeKey)
	lock.Lock()
	defer lock.Unlock()
	if err := m.RemoveByName(ctx, in.ID); err != nil {
		return in, err
	}
	m.forgetObject(in.Name)
	if workspace {
		l := m.layoutFor(in.ScopeKey, in.Name)
		for _, dir := range []string{l.AgentDir, filepath.Dir(l.SandboxDir)} {
			if err := removeTree(dir); err != nil {
				return in, fmt.Errorf("sandbox %s: removed; its workspace %s: %w", in.Name, dir, err)
			}
		}
	}
	return in, nil
}

// Workspace returns the host directory of the agent workspace of the
// sandbox in (what Delete with workspace removes, with the sandbox's own
// directory in the state directory).
func (m *DockerEngine) Workspace(in Info) string {
	return m.layoutFor(in.ScopeKey, in.Name).AgentDir
}

// Pause freezes the sandbox ref (the Engine's pause): its commands stop
// where they are, and a new command for its scope is refused (ErrPaused)
// until Resume.
func (m *DockerEngine) Pause(ctx context.Context, ref string) (Info, error) {
	in, err := m.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	lock := m.scopeLock(in.ScopeKey)
	lock.Lock()
	defer lock.Unlock()
	if in.State != string(container.StateRunning) {
		return in, fmt.Errorf("%w: sandbox %s is %s, not running", cerrdefs.ErrConflict, in.Name, in.State)
	}
	if err := m.markPaused(in.Name, in.ID); err != nil {
		return in, err
	}
	m.warm.forgetID(in.ID)
	if _, err := m.cli.ContainerPause(ctx, in.ID, client.ContainerPauseOptions{}); err != nil {
		_ = os.Remove(m.objectFile(in.Name, pausedFile))
		return in, m.classify("pause sandbox "+in.Name, err)
	}
	m.clients.drop(in.ID)
	m.logf("sandbox %s: paused on request", in.Name)
	return m.Get(ctx, in.ID)
}

// Resume unpauses the sandbox ref.
func (m *DockerEngine) Resume(ctx context.Context, ref string) (Info, error) {
	in, err := m.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	lock := m.scopeLock(in.ScopeKey)
	lock.Lock()
	defer lock.Unlock()
	if in.State != string(container.StatePaused) {
		return in, fmt.Errorf("%w: sandbox %s is %s, not paused", cerrdefs.ErrConflict, in.Name, in.State)
	}
	if err := m.resume(ctx, in.ID, in.Name); err != nil {
		return in, err
	}
	if err := os.Remove(m.objectFile(in.Name, pausedFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return in, fmt.Errorf("sandbox %s: resumed; %w", in.Name, err)
	}
	m.reg.touch(in.Name, in.ScopeKey) // not idle: not paused again at once
	return m.Get(ctx, in.ID)
}

// Extend sets the sandbox ref to expire ttl from now.
func (m *DockerEngine) Extend(ctx context.Context, ref string, ttl time.Duration) (Info, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return Info{}, fmt.Errorf("%w: ttl %s: want more than 0 and at most %s", errBadInput, ttl, MaxTTL)
	}
	in, err := m.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	if in.Pool == PoolReady {
		return in, fmt.Errorf("%w: sandbox %s is a warm-pool sandbox: it has no TTL", errBadInput, in.Name)
	}
	if err := m.setExpiry(in.Name, in.ID, m.now().Add(ttl)); err != nil {
		return in, err
	}
	return m.Get(ctx, in.ID)
}

// ExpireDue removes the sandboxes whose TTL passed and returns them. It
// asks the Engine only when an expiry recorded in the state directory is
// due, so it is cheap to call often.
func (m *DockerEngine) ExpireDue(ctx context.Context) ([]Info, error) {
	files, _ := filepath.Glob(filepath.Join(m.stateDir, "sandboxes", "*", expiryFile))
	due := false
	for _, f := range files {
		if e, ok := readExpiry(f); ok && !m.now().Before(time.UnixMilli(e.ExpiresAtMs)) {
			due = true
			break
		}
	}
	if !due {
		return nil, nil
	}
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	var gone []Info
	for _, in := range list {
		if in.ExpiresAt.IsZero() || m.now().Before(in.ExpiresAt) {
			continue
		}
		lock := m.scopeLock(in.ScopeKey)
		lock.Lock()
		err := m.RemoveByName(ctx, in.ID)
		lock.Unlock()
		if err != nil && !errors.Is(err, ErrNotFound) {
			return gone, err
		}
		m.forgetObject(in.Name)
		gone = append(gone, in)
	}
	// Expiry records of sandboxes removed some other way.
	names := map[string]bool{}
	for _, in := range list {
		names[in.Name] = true
	}
	for _, f := range files {
		if n := filepath.Base(filepath.Dir(f)); !names[n] {
			_ = os.Remove(f)
		}
	}
	return gone, nil
}

// RunExpiry removes expired sandboxes every interval until ctx ends,
// telling removed about each.
func (m *Manager) RunExpiry(ctx context.Context, interval time.Duration, removed func(Info)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gone, err := m.ExpireDue(ctx)
		if err != nil {
			m.logf("sandbox expiry: %v", err)
		}
		for _, in := range gone {
			m.logf("sandbox %s: removed, its TTL passed at %s", in.Name, in.ExpiresAt.Format(time.RFC3339))
			if removed != nil {
				removed(in)
			}
		}
	}
}

// The per-sandbox files in <state>/sandboxes/<name>/.
const (
	expiryFile = "expiry.json"
	pausedFile = "paused"
)

type expiryRecord struct {
	ID          string `json:"id"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
}

func (m *DockerEngine) objectFile(name, file string) string {
	return filepath.Join(m.stateDir, "sandboxes", name, file)
}

func readExpiry(path string) (expiryRecord, bool) {
	var e expiryRecord
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &e) != nil || e.ExpiresAtMs <= 0 {
		return e, false
	}
	return e, true
}

func (m *DockerEngine) setExpiry(name, id string, at time.Time) error {
	p := m.objectFile(name, expiryFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("sandbox %s: expiry: %w", name, err)
	}
	data, _ := json.Marshal(expiryRecord{ID: id, ExpiresAtMs: at.UnixMilli()})
	if err := atomicfile.Write(p, data, 0o600); err != nil {
		return fmt.Errorf("sandbox %s: expiry: %w", name, err)
	}
	return nil
}

// expiresAt is when sandbox name (container id) expires: its extension
// in the state directory, else the expiry it was created with.
func (m *DockerEngine) expiresAt(name, id string, labels map[string]string) time.Time {
	if e, ok := readExpiry(m.objectFile(name, expiryFile)); ok && e.ID == id {
		return time.UnixMilli(e.ExpiresAtMs)
	}
	if ms, _ := strconv.ParseInt(labels[LabelExpiresAt], 10, 64); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

func (m *DockerEngine) markPaused(name, id string) error {
	p := m.objectFile(name, pausedFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("sandbox %s: %w", name, err)
	}
	if err := atomicfile.Write(p, []byte(id), 0o600); err != nil {
		return fmt.Errorf("sandbox %s: %w", name, err)
	}
	return nil
}

// pausedOnRequest reports whether sandbox name (container id) was paused
// by Pause rather than as idle.
func (m *DockerEngine) pausedOnRequest(name, id string) bool {
	data, err := os.ReadFile(m.objectFile(name, pausedFile))
	return err == nil && string(data) == id
}

func (m *DockerEngine) forgetObject(name string) {
	_ = os.Remove(m.objectFile(name, expiryFile))
	_ = os.Remove(m.objectFile(name, pausedFile))
}

// carriedLabels are what a sandbox recreated for a config change keeps of
// container id: its template (while the config defines it), labels and
// expiry.
func (m *DockerEngine) carriedLabels(name, id string, labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if strings.HasPrefix(k, LabelUserPrefix) {
			out[k] = v
		}
	}
	if t := labels[LabelTemplate]; t != "" {
		if _, err := m.cfg.TemplateDocker(t); err == nil {
			out[LabelTemplate] = t
		}
	}
	if at := m.expiresAt(name, id, labels); !at.IsZero() {
		out[LabelExpiresAt] = strconv.FormatInt(at.UnixMilli(), 10)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func templateOrDefault(t string) string {
	if t == "" {
		return sandboxconfig.DefaultTemplate
	}
	return t
}

func templateOf(labels map[string]string) string {
	if t := labels[LabelTemplate]; t != "" {
		return t
	}
	return sandboxconfig.DefaultTemplate
}

func userLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if k, ok := strings.CutPrefix(k, LabelUserPrefix); ok {
			out[k] = v
		}
	}
	return out
}
