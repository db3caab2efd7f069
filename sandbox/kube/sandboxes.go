package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// Annotations of the sandbox lifecycle (Backend).
const (
	// AnnotationExpiresAt is when the daemon removes the sandbox (its
	// TTL), in Unix milliseconds.
	AnnotationExpiresAt = "sandboxctl.io/expires-at"
	// AnnotationLabels holds the labels a sandbox was created with, as a
	// JSON object (label keys and values of the sandbox API are wider than
	// a Kubernetes label's).
	AnnotationLabels = "sandboxctl.io/labels"
)

// EngineName is the name of the Kubernetes engine in sandbox.Info.Engine,
// the engine list and errors.
const EngineName = "kubernetes"

// Backend is the Engine as the sandbox Manager's engine (sandbox.Backend):
// the sandboxes API, the CLI and the files API reach the Pods through the
// Manager as they reach Docker containers, and sessions runs the Pods'
// commands through the Manager too.
type Backend struct {
	e   *Engine
	cfg sandboxconfig.Config

	poolOnce sync.Once
	ctx      context.Context // the pool's, ended by Close
	cancel   context.CancelFunc
}

var _ sandbox.Backend = (*Backend)(nil)

// NewBackend returns the sandbox.Backend over e, whose config is cfg (the
// one e was made from: its scope mode, container prefix and pool size).
func NewBackend(e *Engine, cfg sandboxconfig.Config) *Backend {
	ctx, cancel := context.WithCancel(context.Background())
	return &Backend{e: e, cfg: cfg, ctx: ctx, cancel: cancel}
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return EngineName }

// Where implements sandbox.Backend: the API server and namespace.
func (b *Backend) Where() string { return b.e.rc.Host + " namespace " + b.e.ns }

// Caps implements sandbox.Backend: files through the supervisor's file
// tool; pause when the Engine pauses to zero, which needs a workspace claim
// (sandbox.kubernetes.workspaceStorageClass).
func (b *Backend) Caps() sandbox.BackendCaps {
	return sandbox.BackendCaps{Pause: b.e.shape.StorageClass != "", SupervisorPath: SupervisorBin}
}

// Ping implements sandbox.Backend: one list of this Engine's Pods (what
// its Role allows).
func (b *Backend) Ping(ctx context.Context) error {
	_, err := b.e.cs.CoreV1().Pods(b.e.ns).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: b.e.selector.String()})
	if err != nil {
		return fmt.Errorf("kubernetes %s: %w", b.Where(), classify(err))
	}
	return nil
}

// Close implements sandbox.Backend: the pool stops filling, the watch and
// supervisor connections close; the Pods go on.
func (b *Backend) Close() error {
	b.cancel()
	return b.e.Close()
}

func (b *Backend) scopeKey(s sandbox.Scope) string { return sandbox.ScopeKey(b.cfg.Scope, s) }

func (b *Backend) name(scopeKey string) string {
	return sandbox.ContainerName(b.cfg.Docker.ContainerPrefix, scopeKey)
}

func (b *Backend) result(s sandbox.Scope, sb Sandbox) sandbox.EnsureResult {
	k := b.scopeKey(s)
	return sandbox.EnsureResult{ID: sb.Pod, Name: b.name(k), ScopeKey: k, Created: sb.Created, Started: sb.Created,
		Supervised: true, Engine: EngineName}
}

// Ensure implements sandbox.Backend.
func (b *Backend) Ensure(ctx context.Context, s sandbox.Scope) (sandbox.EnsureResult, error) {
	sb, err := b.e.Ensure(ctx, Scope(s))
	if err != nil {
		return sandbox.EnsureResult{}, err
	}
	// The files API and List find the Pod in the watch's cache: a call
	// right after this one must find it there, claimed.
	if err := b.e.cached(ctx, sb.Pod, true, claimed); err != nil {
		return sandbox.EnsureResult{}, err
	}
	return b.result(s, sb), nil
}

// claimed says whether p is a scope's (not a warm Pod waiting).
func claimed(p *corev1.Pod) bool { return p.Labels[LabelScope] != "" }

// Create implements sandbox.Backend: the scope's Pod (from the warm pool
// when one is ready), with o's labels and TTL in its annotations. Pods
// have one shape (sandbox.docker and sandbox.kubernetes): another template
// is not supported.
func (b *Backend) Create(ctx context.Context, s sandbox.Scope, o sandbox.CreateOptions) (sandbox.Info, error) {
	if o.Template != "" && o.Template != sandboxconfig.DefaultTemplate {
		return sandbox.Info{}, fmt.Errorf("%w: template %q: templates other than %q not supported by the %s sandbox engine",
			sandbox.ErrNotImplemented, o.Template, sandboxconfig.DefaultTemplate, EngineName)
	}
	// Engine.Create refuses a scope with a sandbox (running or paused)
	// under the scope's lock: of two Creates, or a Create and a command's
	// Ensure, of one scope at once, one makes it.
	sb, err := b.e.Create(ctx, Scope(s))
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("create sandbox for scope %s: %w", b.scopeKey(s), err)
	}
	res := b.result(s, sb)
	ann := map[string]*string{}
	if len(o.Labels) > 0 {
		raw, err := json.Marshal(o.Labels)
		if err != nil {
			return sandbox.Info{}, err
		}
		v := string(raw)
		ann[AnnotationLabels] = &v
	}
	if o.TTL > 0 {
		v := strconv.FormatInt(time.Now().Add(o.TTL).UnixMilli(), 10)
		ann[AnnotationExpiresAt] = &v
	}
	in, err := b.get(ctx, res.ID)
	if err != nil || len(ann) == 0 {
		return in, err
	}
	if err := b.annotate(ctx, in, ann); err != nil {
		// A sandbox without the labels or TTL asked for is not the one
		// asked for: it goes, and the error says why.
		if rerr := b.Remove(context.WithoutCancel(ctx), in); rerr != nil {
			return sandbox.Info{}, fmt.Errorf("%w (and removing the sandbox made for it: %v)", err, rerr)
		}
		return sandbox.Info{}, err
	}
	return b.get(ctx, res.ID)
}

// annotate sets (nil: removes) the lifecycle annotations (labels, TTL) of
// the sandbox in: on its workspace claim when it has one (they outlive a
// pause there), else on its Pod.
func (b *Backend) annotate(ctx context.Context, in sandbox.Info, ann map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	if b.e.shape.StorageClass != "" {
		if claim := b.claimOf(in); claim != "" {
			if _, err := b.e.cs.CoreV1().PersistentVolumeClaims(b.e.ns).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("sandbox workspace claim %s: %w", claim, classify(err))
			}
			return nil // List reads claims from the API server
		}
	}
	name := in.ID
	if _, err := b.e.cs.CoreV1().Pods(b.e.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("sandbox pod %s: %w", name, classify(err))
	}
	return b.e.cached(ctx, name, true, func(p *corev1.Pod) bool {
		for k, v := range ann {
			got, ok := p.Annotations[k]
			if (v == nil && ok) || (v != nil && got != *v) {
				return false
			}
		}
		return true
	})
}

// List implements sandbox.Backend, from the watch's cache (the daemon's
// expiry loop lists every second): the calls that change a Pod (Create,
// SetExpiry, Remove) wait until the cache shows the change, so a List after
// them sees it.
//
// With workspace claims (sandbox.kubernetes.workspaceStorageClass) the
// claims come from the API server: a paused sandbox is its claim alone.
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	pods, err := b.e.pods.List(b.e.selector)
	if err != nil {
		return nil, fmt.Errorf("list sandbox pods: %w", err)
	}
	claims, err := b.claims(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Info, 0, len(pods))
	live := map[string]bool{}
	for _, p := range pods {
		h := p.Labels[LabelScope]
		if h == "" && p.Labels[LabelPool] == "" {
			continue // not a sandbox (the NetworkPolicy's probe)
		}
		if h != "" && p.DeletionTimestamp == nil {
			live[h] = true
		}
		out = append(out, b.info(p, claims[h]))
	}
	for h, c := range claims {
		if !live[h] {
			out = append(out, b.pausedInfo(c))
		}
	}
	slices.SortFunc(out, func(x, y sandbox.Info) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return out, nil
}

// claims are this Engine's workspace claims by scope hash (none without
// a workspaceStorageClass).
func (b *Backend) claims(ctx context.Context) (map[string]*corev1.PersistentVolumeClaim, error) {
	if b.e.shape.StorageClass == "" {
		return nil, nil
	}
	list, err := b.e.cs.CoreV1().PersistentVolumeClaims(b.e.ns).List(ctx, metav1.ListOptions{LabelSelector: b.e.selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list workspace claims: %w", classify(err))
	}
	out := make(map[string]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		c := &list.Items[i]
		if h := c.Labels[LabelScope]; h != "" && c.DeletionTimestamp == nil {
			out[h] = c
		}
	}
	return out, nil
}

// claimOf is the workspace claim of the sandbox in ("" for a warm Pod).
func (b *Backend) claimOf(in sandbox.Info) string {
	if in.Pool == sandbox.PoolReady {
		return ""
	}
	return claimName(scopeHash(b.e.key(Scope{AgentID: in.AgentID, SessionKey: in.SessionKey})))
}

// pausedInfo is a sandbox paused to zero: its workspace claim, no Pod.
func (b *Backend) pausedInfo(c *corev1.PersistentVolumeClaim) sandbox.Info {
	in := sandbox.Info{Sandbox: api.Sandbox{
		ID: c.Name, State: "paused", Image: b.e.shape.Image, CreatedAt: c.CreationTimestamp.Time, Current: true,
		Engine: EngineName, Path: sandbox.PathSupervisor, Template: sandboxconfig.DefaultTemplate,
	}}
	b.owned(&in, c.Annotations, c.Annotations)
	return in
}

// owned fills in the owner of a sandbox (from its Pod's or claim's
// annotations) and its labels and TTL (from lc's: the claim's when it has
// one).
func (b *Backend) owned(in *sandbox.Info, owner, lc map[string]string) {
	s := sandbox.Scope{AgentID: owner[AnnotationAgent], SessionKey: owner[AnnotationSessionKey]}
	in.AgentID, in.SessionKey = s.AgentID, s.SessionKey
	in.ScopeKey = b.scopeKey(s)
	in.Name = b.name(in.ScopeKey)
	in.Labels = map[string]string{}
	if raw := lc[AnnotationLabels]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &in.Labels) // written by Create; a bad one shows no labels
	}
	if ms, err := strconv.ParseInt(lc[AnnotationExpiresAt], 10, 64); err == nil && ms > 0 {
		in.ExpiresAt = time.UnixMilli(ms)
	}
}

func (b *Backend) get(ctx context.Context, pod string) (sandbox.Info, error) {
	if err := b.e.cached(ctx, pod, true, nil); err != nil {
		return sandbox.Info{}, err
	}
	p, err := b.e.pods.Pods(b.e.ns).Get(pod)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("sandbox pod %s: %w", pod, classify(err))
	}
	var claim *corev1.PersistentVolumeClaim
	if h := p.Labels[LabelScope]; h != "" && b.e.shape.StorageClass != "" {
		c, err := b.e.cs.CoreV1().PersistentVolumeClaims(b.e.ns).Get(ctx, claimName(h), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return sandbox.Info{}, fmt.Errorf("sandbox workspace claim %s: %w", claimName(h), classify(err))
		}
		if err == nil {
			claim = c
		}
	}
	return b.info(p, claim), nil
}

// info is Pod p as a sandbox: its id is the Pod's name; a claimed Pod is
// named as a Docker sandbox of its scope is (so `sandbox rm NAME` and
// Manager.Remove find it), a warm one by its Pod name.
func (b *Backend) info(p *corev1.Pod, claim *corev1.PersistentVolumeClaim) sandbox.Info {
	in := sandbox.Info{Sandbox: api.Sandbox{
		ID: p.Name, Name: p.Name, State: podState(p), Image: b.e.shape.Image, CreatedAt: p.CreationTimestamp.Time,
		Engine: EngineName, Path: sandbox.PathSupervisor, Template: sandboxconfig.DefaultTemplate, Labels: map[string]string{},
	}}
	for _, c := range p.Spec.Containers {
		if c.Name == ContainerName {
			in.Image = c.Image
		}
	}
	// A Pod of another image is of another config (it is not recreated:
	// remove it to get one of the config in force).
	in.Current = in.Image == b.e.shape.Image
	if p.Labels[LabelScope] == "" {
		in.Pool = sandbox.PoolReady
		return in
	}
	lc := p.Annotations
	if claim != nil {
		lc = claim.Annotations
	}
	b.owned(&in, p.Annotations, lc)
	return in
}

// podState is a Pod's state in the words of sandbox.Info.State.
func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "removing"
	}
	if ended, _ := podEnded(p); ended {
		return "exited"
	}
	if containerRunning(p) {
		return "running"
	}
	return "created"
}

// Remove implements sandbox.Backend: the scope's sandbox is removed
// (Engine.Remove: its Pod, so its sessions end, and its workspace) and
// waited for, so the next List does not show it; a warm Pod is deleted.
func (b *Backend) Remove(ctx context.Context, in sandbox.Info) error {
	if in.State == "paused" {
		// Its claim alone (no Pod).
		if err := b.e.Remove(ctx, Scope{AgentID: in.AgentID, SessionKey: in.SessionKey}); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", in.Name, err)
		}
		return nil
	}
	if _, err := b.e.pods.Pods(b.e.ns).Get(in.ID); apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: sandbox %s (pod %s) is gone", sandbox.ErrNotFound, in.Name, in.ID)
	}
	var err error
	if in.Pool == sandbox.PoolReady {
		err = b.removeWarm(ctx, in.ID)
	} else {
		err = b.e.Remove(ctx, Scope{AgentID: in.AgentID, SessionKey: in.SessionKey})
	}
	if err != nil {
		return fmt.Errorf("remove sandbox %s (pod %s): %w", in.Name, in.ID, err)
	}
	if err := b.e.cached(ctx, in.ID, false, nil); err != nil {
		// Deleted; the kubelet has not confirmed yet. It goes.
		b.e.logf("sandbox pod %s: deleted, still terminating: %v", in.ID, err)
	}
	return nil
}

// removeWarm deletes warm Pod name if it is still warm: a claim relabels a
// warm Pod in place, so an Info listed before it is claimed must not delete
// the scope's sandbox it has become. The Pod is read again from the API
// server and deleted on the condition that it did not change since
// (its resourceVersion); a change in between is read again.
func (b *Backend) removeWarm(ctx context.Context, name string) error {
	pods := b.e.cs.CoreV1().Pods(b.e.ns)
	claimedErr := fmt.Errorf("%w: the warm pod %s was just claimed (it is a sandbox now; list again)", cerrdefs.ErrConflict, name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels[LabelPool] != PoolReady {
			return claimedErr
		}
		grace, rv := int64(0), p.ResourceVersion
		return pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case errors.Is(err, claimedErr):
		return err
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: the warm pod %s was just claimed or changed: %w", cerrdefs.ErrConflict, name, err)
	}
	return classify(err)
}

// SetExpiry implements sandbox.Backend: the TTL is an annotation of the
// Pod (another daemon of the namespace sees it too).
func (b *Backend) SetExpiry(ctx context.Context, in sandbox.Info, at time.Time) error {
	var v *string
	if !at.IsZero() {
		s := strconv.FormatInt(at.UnixMilli(), 10)
		v = &s
	}
	return b.annotate(ctx, in, map[string]*string{AnnotationExpiresAt: v})
}

// Explain implements sandbox.Backend.
func (b *Backend) Explain(ctx context.Context, s sandbox.Scope) (sandbox.Explanation, error) {
	k := b.scopeKey(s)
	raw, err := json.Marshal(b.cfg)
	if err != nil {
		return sandbox.Explanation{}, err
	}
	runtime := b.cfg.Kubernetes.RuntimeClassName
	if runtime == "" {
		runtime = "the cluster's default RuntimeClass"
	}
	ex := sandbox.Explanation{
		ScopeKey: k, Name: b.name(k), Config: raw, Runtime: runtime, Engine: EngineName,
		Limits: sandbox.Limits{
			User: strconv.FormatInt(b.e.shape.RunAsUser, 10), Memory: b.e.shape.Memory.String(), CPUs: b.cfg.Docker.CPUs,
			Tmpfs: map[string]string{"/tmp": b.e.shape.Tmp.String(), "/run": b.e.shape.Run.String()},
		},
		WorkspaceQuota: "emptyDir sizeLimit " + b.e.shape.Workspace.String() + " (sandbox.kubernetes.workspaceSize)",
		Snapshots:      "not supported by the " + EngineName + " sandbox engine",
		Recreate:       "no pod yet: the next command creates it",
	}
	if pod := b.e.PodOf(Scope(s)); pod != "" {
		in, err := b.get(ctx, pod)
		if err != nil {
			return ex, err
		}
		ex.Container, ex.Recreate = &in, "no: pods are not recreated when the config changes (remove it to get one of the config in force)"
		if in.Current {
			ex.Recreate = "no: the pod is of the config in force"
		}
	}
	return ex, nil
}

// Pause implements sandbox.Backend: the Pod is deleted, the workspace
// claim kept (Engine.Pause; without a claim it answers
// ErrFailedPrecondition, and Caps says Pause is false).
func (b *Backend) Pause(ctx context.Context, in sandbox.Info) (sandbox.Info, error) {
	if err := b.e.Pause(ctx, Scope{AgentID: in.AgentID, SessionKey: in.SessionKey}); err != nil {
		return in, err
	}
	// Its Pod is gone; its workspace claim is kept, and is the sandbox.
	c, err := b.e.cs.CoreV1().PersistentVolumeClaims(b.e.ns).Get(ctx, b.claimOf(in), metav1.GetOptions{})
	if err != nil {
		return in, fmt.Errorf("sandbox %s: paused; its workspace claim: %w", in.Name, classify(err))
	}
	if err := b.e.cached(ctx, in.ID, false, nil); err != nil {
		b.e.logf("sandbox pod %s: paused, still terminating: %v", in.ID, err)
	}
	return b.pausedInfo(c), nil
}

// Resume implements sandbox.Backend: a new Pod on the kept claim.
func (b *Backend) Resume(ctx context.Context, in sandbox.Info) (sandbox.Info, error) {
	s := sandbox.Scope{AgentID: in.AgentID, SessionKey: in.SessionKey}
	if err := b.e.Resume(ctx, Scope(s)); err != nil {
		return in, err
	}
	res, err := b.Ensure(ctx, s) // its new Pod, as the watch's cache shows it
	if err != nil {
		return in, err
	}
	return b.get(ctx, res.ID)
}

// Start implements sandbox.Backend: the command runs through the
// supervisor of the scope's Pod (Engine.Start: at most once).
func (b *Backend) Start(ctx context.Context, s sandbox.Scope, opts sandbox.ExecOptions) (*sandbox.Started, error) {
	if len(opts.Cmd) == 0 {
		return nil, fmt.Errorf("%w: sandbox exec: empty command", cerrdefs.ErrInvalidArgument)
	}
	id := opts.Tag
	if id == "" {
		id = newID()
	}
	dir := opts.Dir
	if dir == "" {
		dir = Workspace
	}
	st, err := b.e.Start(ctx, StartSpec{
		Scope: Scope(s),
		OpenSpec: supervisor.OpenSpec{ID: id, Argv: opts.Cmd, Env: opts.Env, Dir: dir,
			PTY: opts.PTY, Cols: opts.Cols, Rows: opts.Rows, KeepStdin: opts.KeepStdin || opts.PTY, Meta: maps.Clone(opts.Meta)},
		StartWait: opts.StartWait,
	})
	if err != nil {
		return nil, err
	}
	pod, id := st.Pod, st.Proc.ID()
	if err := b.e.cached(ctx, pod, true, claimed); err != nil {
		// As in Ensure; the command runs already, so it is not failed.
		b.e.logf("sandbox pod %s: %v", pod, err)
	}
	forget := func(ctx context.Context) error { return b.e.Forget(ctx, pod, id) }
	k := b.scopeKey(s)
	out := &sandbox.Started{
		Process: sandbox.NewSupervisedExec(st.Client, st.Proc, pod, forget),
		Ensure:  sandbox.EnsureResult{ID: pod, Name: b.name(k), ScopeKey: k, Supervised: true, Engine: EngineName},
	}
	if st.Warning != "" {
		out.Warnings = []string{st.Warning}
	}
	return out, nil
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Supervisor implements sandbox.Backend: the supervisor connection of the
// scope's running Pod; a scope without one is sandbox.ErrNoSandbox (a
// typo in an agent name must not create a sandbox).
func (b *Backend) Supervisor(ctx context.Context, s sandbox.Scope) (*supervisor.Client, error) {
	pod := b.e.PodOf(Scope(s))
	if pod == "" {
		k := b.scopeKey(s)
		return nil, fmt.Errorf("%w for scope %s: run a command there first (sandboxctl exec --agent %s -- true)", sandbox.ErrNoSandbox, k, s.AgentID)
	}
	if err := b.e.waitRunning(ctx, pod); err != nil {
		return nil, err
	}
	return b.e.client(ctx, pod)
}

// SupervisorOf implements sandbox.Backend: the supervisor connection of
// this Engine's Pod id.
func (b *Backend) SupervisorOf(ctx context.Context, id string) (*supervisor.Client, error) {
	p, err := b.e.pods.Pods(b.e.ns).Get(id)
	if err != nil || !b.e.selector.Matches(labels.Set(p.Labels)) {
		return nil, fmt.Errorf("%w: no sandbox pod %s", sandbox.ErrNotFound, id)
	}
	return b.e.client(ctx, id)
}

// StartPool implements sandbox.Backend (sandbox.pool.size Pods; once).
func (b *Backend) StartPool() {
	b.poolOnce.Do(func() { b.e.StartPool(b.ctx, b.cfg.Pool.Size) })
}

// Pool implements sandbox.Backend: the warm Pods running now.
func (b *Backend) Pool() sandbox.PoolStatus {
	st := sandbox.PoolStatus{Size: max(b.cfg.Pool.Size, 0)}
	pods, err := b.e.pods.List(b.e.poolSelector())
	if err != nil {
		st.LastErr = err.Error()
		return st
	}
	for _, p := range pods {
		if ended, _ := podEnded(p); !ended && containerRunning(p) {
			st.Ready++
		}
	}
	return st
}
