// Package kube is the Kubernetes engine of the sandbox host: one Pod per
// sandbox (the user's image, unchanged, with the static supervisor as its
// main process, copied in by an init container), reached over the Pod's
// attach stream with the protocol of package supervisor, exactly as a
// Docker Engine's container is. Selected by sandbox.kubernetes
// (docs/scale-out.md).
package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/go-units"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// Options configure an Engine.
type Options struct {
	// Config is the sandbox section; its Kubernetes part must be enabled.
	Config sandboxconfig.Config
	// Labels are added to every Pod (tests mark theirs to clean them up).
	Labels map[string]string
	// Instance, when set, is a label value that scopes the Pods this
	// Engine sees and makes (tests run several Engines in one namespace).
	Instance string
	Logf     func(format string, args ...any)
}

// LabelInstance carries Options.Instance.
const LabelInstance = "sandboxctl.io/instance"

// Errors of the engine.
var (
	// ErrPodGone means a sandbox Pod ended (deleted, evicted, OOM-killed,
	// its node lost); the sessions in it ended with it.
	ErrPodGone = fmt.Errorf("%w: sandbox pod gone", supervisor.ErrGone)
	// ErrNetworkPolicyUnverified: the deny-all NetworkPolicy of the sandbox
	// Pods cannot be shown to be enforced (networkPolicy: require).
	ErrNetworkPolicyUnverified = fmt.Errorf("%w: the cluster's network plugin is not shown to enforce the deny-all NetworkPolicy of sandbox Pods (sandbox.kubernetes.networkPolicy: require)", cerrdefs.ErrFailedPrecondition)
)

// Engine runs sandboxes as Pods of one namespace.
type Engine struct {
	cs       kubernetes.Interface
	rc       *rest.Config
	ns       string
	scope    string
	shape    podShape
	labels   map[string]string // Options.Labels + instance
	selector labels.Selector
	logf     func(string, ...any)
	warning  string // the NetworkPolicy's, said with the first command of a sandbox

	pods listersv1.PodLister
	// stop ends the watches and the warm pool; bg counts their goroutines
	// (Close waits for them).
	stop      context.CancelFunc
	stopped   context.Context
	informers []informers.SharedInformerFactory
	bg        sync.WaitGroup

	selectorSet labels.Set // what selects this Engine's Pods
	poolSize    int
	poolKick    chan struct{} // buffered 1: the pool looks again

	mu       sync.Mutex
	clients  map[string]*supervisor.Client // by Pod name
	ended    map[string]string             // Pod name -> why it ended
	ensuring map[string]*sync.Mutex        // by scope hash
	dialing  map[string]*sync.Mutex        // by Pod name
}

// New connects to the cluster, checks the namespace and the NetworkPolicy,
// and starts the Pod watch.
func New(ctx context.Context, opts Options) (*Engine, error) {
	k := opts.Config.Kubernetes
	if !k.Enabled {
		return nil, fmt.Errorf("%w: sandbox.kubernetes.enabled is false", cerrdefs.ErrInvalidArgument)
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	sh, err := shapeOf(opts.Config)
	if err != nil {
		return nil, err
	}
	rc, err := restConfig(k.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	e := &Engine{
		cs: cs, rc: rc, ns: k.Namespace, scope: opts.Config.Scope, shape: sh, logf: opts.Logf,
		labels:  maps.Clone(opts.Labels),
		clients: map[string]*supervisor.Client{}, ended: map[string]string{}, ensuring: map[string]*sync.Mutex{}, dialing: map[string]*sync.Mutex{},
		poolKick: make(chan struct{}, 1),
	}
	e.stopped, e.stop = context.WithCancel(context.Background())
	if e.logf == nil {
		e.logf = func(string, ...any) {}
	}
	if e.labels == nil {
		e.labels = map[string]string{}
	}
	sel := labels.Set{LabelManaged: "1"}
	if opts.Instance != "" {
		e.labels[LabelInstance] = opts.Instance
		sel[LabelInstance] = opts.Instance
	}
	e.selector, e.selectorSet = sel.AsSelector(), sel
	// The NetworkPolicy comes first: nothing runs in a namespace without
	// it, and creating it checks that the namespace exists and that this
	// daemon's Role allows it (namespaces are not readable with a Role).
	if err := e.ensurePolicy(ctx, k.NetworkPolicy); err != nil {
		return nil, err
	}
	if err := e.startWatch(ctx); err != nil {
		e.shutdown()
		return nil, err
	}
	if err := e.startNodeWatch(ctx); err != nil {
		e.shutdown()
		return nil, err
	}
	return e, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes configuration: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}

// shapeOf parses what the Pods are made of from the config.
func shapeOf(c sandboxconfig.Config) (podShape, error) {
	d, k := c.Docker, c.Kubernetes
	mem, err := units.RAMInBytes(d.Memory)
	if err != nil || mem <= 0 {
		return podShape{}, &sandboxconfig.ConfigError{Field: "sandbox.docker.memory", Value: d.Memory, Msg: "must be a size above 0 for Kubernetes sandboxes (limits = requests)"}
	}
	if d.CPUs <= 0 {
		return podShape{}, &sandboxconfig.ConfigError{Field: "sandbox.docker.cpus", Value: fmt.Sprint(d.CPUs), Msg: "must be above 0 for Kubernetes sandboxes (limits = requests)"}
	}
	ws, _ := units.RAMInBytes(k.WorkspaceSize)
	sh := podShape{
		StorageClass: k.WorkspaceStorageClass,
		Image:        d.Image, Env: maps.Clone(d.Env), RunAsUser: k.RunAsUser, RuntimeClassName: k.RuntimeClassName,
		SupervisorImage: k.SupervisorImage, SupervisorPath: k.SupervisorPath, Labels: maps.Clone(k.Labels),
		Memory: *resource.NewQuantity(mem, resource.BinarySI),
		CPU:    *resource.NewMilliQuantity(int64(d.CPUs*1000), resource.DecimalSI),
		Tmp:    resource.MustParse("256Mi"), Run: resource.MustParse("16Mi"),
	}
	if sh.Workspace, err = quantity("sandbox.kubernetes.workspaceSize", ws); err != nil {
		return podShape{}, err
	}
	tmpfs, err := sandboxconfig.ParseTmpfsList(d)
	if err != nil {
		return podShape{}, err
	}
	for _, t := range tmpfs {
		switch t.Path {
		case "/tmp":
			sh.Tmp = *resource.NewQuantity(t.Size, resource.BinarySI)
		case "/run":
			sh.Run = *resource.NewQuantity(t.Size, resource.BinarySI)
		}
	}
	return sh, nil
}

// classify maps an API error onto the errdefs classes callers branch on.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w", cerrdefs.ErrNotFound, err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: %w", cerrdefs.ErrPermissionDenied, err)
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		return fmt.Errorf("%w: %w", cerrdefs.ErrConflict, err)
	}
	return fmt.Errorf("%w: %w", cerrdefs.ErrUnavailable, err)
}

// Close stops the watches and the warm pool (and waits for their
// goroutines) and closes the supervisor connections; the Pods and their
// commands go on (a new Engine re-adopts them).
func (e *Engine) Close() error {
	e.shutdown()
	e.mu.Lock()
	cl := slices.Collect(maps.Values(e.clients))
	e.clients = map[string]*supervisor.Client{}
	e.mu.Unlock()
	for _, c := range cl {
		_ = c.Close()
	}
	return nil
}

// shutdown stops the watches and the warm pool and waits for them.
func (e *Engine) shutdown() {
	e.stop()
	for _, f := range e.informers {
		f.Shutdown()
	}
	e.bg.Wait()
}

// Scope is the caller a sandbox belongs to.
type Scope struct{ AgentID, SessionKey string }

// key is the scope's sandbox key under the configured sandbox.scope.
func (e *Engine) key(s Scope) string {
	switch e.scope {
	case "shared":
		return "shared"
	case "session":
		return "session\x00" + s.AgentID + "\x00" + s.SessionKey
	}
	return "agent\x00" + s.AgentID
}

// scopeHash is a label value for a scope key.
func scopeHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:32]
}

// Sandbox is a running sandbox Pod.
type Sandbox struct {
	Pod     string
	Created bool
}

// Ensure returns the running Pod of the scope, creating it (and waiting
// until it runs) when there is none.
//
// With a workspace storage class the scope's claim is made first (or
// found again: a paused sandbox resumes on it), and no warm Pod is taken.
func (e *Engine) Ensure(ctx context.Context, s Scope) (Sandbox, error) {
	h := scopeHash(e.key(s))
	defer e.lockScope(h)()
	if p := e.livePod(h); p != "" {
		if err := e.waitRunning(ctx, p); err != nil {
			return Sandbox{}, err
		}
		return Sandbox{Pod: p}, nil
	}
	return e.create(ctx, h, s)
}

// Create makes the scope's sandbox as Ensure does, and refuses
// (ErrConflict) when the scope has one already: a Pod that has not ended,
// or a workspace claim (a paused sandbox). The check and the making are
// under the scope's lock, so of a Create and an Ensure (or two Creates)
// of one scope at once, one makes the sandbox.
func (e *Engine) Create(ctx context.Context, s Scope) (Sandbox, error) {
	h := scopeHash(e.key(s))
	defer e.lockScope(h)()
	// From the API server, not the watch's cache: a Pod made a moment ago
	// by another Engine of the namespace counts too.
	pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Merge(e.selectorSet, labels.Set{LabelScope: h})).String()})
	if err != nil {
		return Sandbox{}, fmt.Errorf("list the scope's sandbox pods: %w", classify(err))
	}
	for i := range pods.Items {
		if gone, _ := e.podGone(&pods.Items[i]); !gone {
			return Sandbox{}, fmt.Errorf("%w: the scope has a sandbox already (pod %s)", cerrdefs.ErrConflict, pods.Items[i].Name)
		}
	}
	if e.shape.StorageClass != "" {
		c, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, claimName(h), metav1.GetOptions{})
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return Sandbox{}, fmt.Errorf("sandbox workspace claim %s: %w", claimName(h), classify(err))
		case err == nil && c.DeletionTimestamp == nil && e.selector.Matches(labels.Set(c.Labels)):
			return Sandbox{}, fmt.Errorf("%w: the scope has a paused sandbox (workspace claim %s): resume it, or remove it first", cerrdefs.ErrConflict, c.Name)
		}
	}
	return e.create(ctx, h, s)
}

// create makes the sandbox of scope hash h, which has no Pod, and waits
// until it runs and the watch's cache shows it (so the next Ensure of the
// scope finds it). A workspace claim it made goes again when the Pod
// cannot be made or does not start (a claim alone is a paused sandbox).
// The caller holds the scope's lock.
func (e *Engine) create(ctx context.Context, h string, s Scope) (Sandbox, error) {
	lb := maps.Clone(e.labels)
	lb[LabelScope] = h
	ann := map[string]string{AnnotationAgent: s.AgentID, AnnotationSessionKey: s.SessionKey}
	claim, made := "", false
	if e.shape.StorageClass != "" {
		c, mk, err := e.ensureClaim(ctx, h, lb, ann)
		if err != nil {
			return Sandbox{}, err
		}
		claim, made = c.Name, mk
	} else if name := e.claim(ctx, h, s); name != "" {
		if err := e.cached(ctx, name, true, func(p *corev1.Pod) bool { return p.Labels[LabelScope] == h }); err != nil {
			e.logf("sandbox pod %s: %v", name, err)
		}
		return Sandbox{Pod: name, Created: true}, nil
	}
	fail := func(err error) (Sandbox, error) {
		if !made {
			return Sandbox{}, err
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := e.deleteClaim(dctx, h); derr != nil {
			return Sandbox{}, fmt.Errorf("%w (and removing the workspace claim made for it: %v)", err, derr)
		}
		return Sandbox{}, err
	}
	name := "sbx-" + h[:12] + "-" + randomSuffix()
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, buildPod(e.shape, name, e.ns, claim, lb, ann), metav1.CreateOptions{}); err != nil {
		return fail(fmt.Errorf("create sandbox pod: %w", classify(err)))
	}
	if err := e.waitRunning(ctx, name); err != nil {
		e.deletePod(name)
		// From here List shows the Pod going (or nothing), never a
		// sandbox this failed call made.
		if cerr := e.cachedGoing(context.WithoutCancel(ctx), name); cerr != nil {
			e.logf("sandbox pod %s: %v", name, cerr)
		}
		return fail(err)
	}
	if claim != "" {
		if err := e.markResumed(ctx, claim); err != nil {
			e.logf("sandbox pod %s: %v", name, err)
		}
	}
	if err := e.cached(ctx, name, true, nil); err != nil {
		e.logf("sandbox pod %s: %v", name, err)
	}
	return Sandbox{Pod: name, Created: true}, nil
}

// cacheWait is how long a change waits for the watch's cache to show it.
const cacheWait = 30 * time.Second

// cached waits until the watch's cache holds Pod name (found) and ok says
// it shows the change, or, with found false, until it no longer holds it.
func (e *Engine) cached(ctx context.Context, name string, found bool, ok func(*corev1.Pod) bool) error {
	ctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	for {
		p, err := e.pods.Pods(e.ns).Get(name)
		switch {
		case !found && apierrors.IsNotFound(err):
			return nil
		case found && err == nil && (ok == nil || ok(p)):
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox pod %s: the watch did not show the change: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cachedGoing waits, cacheWait at most, until the watch's cache shows Pod
// name deleted or being deleted.
func (e *Engine) cachedGoing(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	for {
		p, err := e.pods.Pods(e.ns).Get(name)
		if apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox pod %s: the watch did not show it going: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lockScope serialises what changes the sandbox of scope hash h (Ensure,
// Pause, Remove); it returns the unlock.
func (e *Engine) lockScope(h string) func() {
	e.mu.Lock()
	l := e.ensuring[h]
	if l == nil {
		l = &sync.Mutex{}
		e.ensuring[h] = l
	}
	e.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// livePod is the name of the Pod of scope hash h that has not ended (in
// the watch's view or this Engine's: a Pod on a lost node), or "".
func (e *Engine) livePod(h string) string {
	pods, err := e.pods.List(labels.SelectorFromSet(labels.Set{LabelScope: h}))
	if err != nil {
		return ""
	}
	for _, p := range pods {
		if !e.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		if gone, _ := e.podGone(p); gone {
			continue
		}
		return p.Name
	}
	return ""
}

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// deletePod deletes a Pod in the background (no wait).
func (e *Engine) deletePod(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	grace := int64(0)
	_ = e.cs.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

// Remove deletes the scope's Pod (its sessions end with it) and its
// workspace claim.
func (e *Engine) Remove(ctx context.Context, s Scope) error {
	h := scopeHash(e.key(s))
	defer e.lockScope(h)()
	pods, err := e.pods.List(labels.SelectorFromSet(labels.Set{LabelScope: h}))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if !e.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		grace := int64(0)
		if err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, classify(err))
		}
	}
	if e.shape.StorageClass != "" {
		errs = append(errs, e.deleteClaim(ctx, h))
	}
	return errors.Join(errs...)
}

// waitRunning waits until the sandbox container of Pod name runs, or
// fails with why it cannot.
func (e *Engine) waitRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("sandbox pod %s: %w", name, classify(err))
		}
		if ended, why := podEnded(p); ended {
			return fmt.Errorf("sandbox pod %s: %w: %s", name, ErrPodGone, why)
		}
		if why := podStuck(p); why != "" {
			return fmt.Errorf("sandbox pod %s cannot start: %w: %s", name, cerrdefs.ErrFailedPrecondition, why)
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == ContainerName && st.State.Running != nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox pod %s did not start: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// containerRunning says whether the sandbox container of p runs.
func containerRunning(p *corev1.Pod) bool {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == ContainerName && st.State.Running != nil {
			return true
		}
	}
	return false
}

// podStuck says why a Pod will not start without help (a missing image, a
// bad spec), or "".
func podStuck(p *corev1.Pod) string {
	for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Sprintf("container %s: %s: %s", st.Name, w.Reason, w.Message)
			}
		}
	}
	return ""
}

// podEnded says whether a sandbox Pod is over (or going), and why.
func podEnded(p *corev1.Pod) (bool, string) {
	// Why before that it goes: an evicted or preempted Pod is also deleted.
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true, "the pod was evicted (" + c.Reason + ": " + c.Message + ")"
		}
	}
	if p.DeletionTimestamp != nil {
		return true, "the pod was deleted"
	}
	if p.Status.Reason == "Evicted" {
		return true, "the pod was evicted: " + p.Status.Message
	}
	if p.Status.Reason == "NodeLost" {
		return true, "the pod's node was lost"
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name != ContainerName {
			continue
		}
		if t := st.State.Terminated; t != nil {
			if t.Reason == "OOMKilled" {
				return true, "the sandbox container was OOMKilled: the sandbox ran out of memory (sandbox.docker.memory)"
			}
			return true, fmt.Sprintf("the sandbox container ended (%s, exit code %d)", t.Reason, t.ExitCode)
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed:
		return true, "the pod failed: " + strings.TrimSpace(p.Status.Reason+" "+p.Status.Message)
	case corev1.PodSucceeded:
		return true, "the pod ended"
	}
	return false, ""
}

// startWatch starts the informer of this Engine's Pods: a Pod that ends
// fails the sessions in it at once, with the reason.
func (e *Engine) startWatch(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = e.selector.String() }))
	inf := f.Core().V1().Pods()
	e.pods = inf.Lister()
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			if ended, why := podEnded(p); ended {
				e.podEnded(p.Name, why)
				return
			}
			// A warm Pod that started: the pool connects to it.
			if o, ok := old.(*corev1.Pod); ok && p.Labels[LabelPool] == PoolReady && containerRunning(p) && !containerRunning(o) {
				e.kickPool()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				e.podEnded(p.Name, "the pod was deleted")
			}
		},
	})
	if err != nil {
		return err
	}
	e.informers = append(e.informers, f)
	f.Start(e.stopped.Done())
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if !cache.WaitForCacheSync(wctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("%w: the watch of sandbox pods did not sync", cerrdefs.ErrUnavailable)
	}
	return nil
}

// podEnded fails the supervisor client of an ended Pod: every session it
// follows ends with why.
func (e *Engine) podEnded(name, why string) {
	e.mu.Lock()
	c := e.clients[name]
	delete(e.clients, name)
	if _, seen := e.ended[name]; !seen {
		e.ended[name] = why
	}
	e.mu.Unlock()
	if c != nil {
		e.logf("sandbox pod %s: %s", name, why)
		c.Fail(fmt.Errorf("sandbox pod %s: %w: %s", name, ErrPodGone, why))
	}
}

// podGone says whether Pod p is over, and why: in the watch's view or
// this Engine's (its node lost, its sandbox paused).
func (e *Engine) podGone(p *corev1.Pod) (bool, string) {
	e.mu.Lock()
	why, ok := e.ended[p.Name]
	e.mu.Unlock()
	if ok {
		return true, why
	}
	return podEnded(p)
}

// gone says whether Pod name is over, and why, from the watch's view.
func (e *Engine) gone(name string) (bool, string) {
	e.mu.Lock()
	why, ok := e.ended[name]
	e.mu.Unlock()
	if ok {
		return true, why
	}
	p, err := e.pods.Pods(e.ns).Get(name)
	if apierrors.IsNotFound(err) {
		return true, "the pod was deleted"
	}
	if err != nil {
		return false, ""
	}
	return podEnded(p)
}

// client is the supervisor client of Pod name: one per Pod, made under
// the Pod's lock (a second client's Hello would take the stream over from
// the first, which follows commands).
func (e *Engine) client(ctx context.Context, name string) (*supervisor.Client, error) {
	e.mu.Lock()
	c := e.clients[name]
	l := e.dialing[name]
	if l == nil {
		l = &sync.Mutex{}
		e.dialing[name] = l
	}
	e.mu.Unlock()
	if c != nil && c.Err() == nil {
		return c, nil
	}
	l.Lock()
	defer l.Unlock()
	e.mu.Lock()
	c = e.clients[name]
	e.mu.Unlock()
	if c != nil && c.Err() == nil {
		return c, nil
	}
	if gone, why := e.gone(name); gone {
		return nil, fmt.Errorf("sandbox pod %s: %w: %s", name, ErrPodGone, why)
	}
	c, err := supervisor.NewClient(ctx, supervisor.ClientOptions{
		Dial: e.dialer(name),
		Logf: func(f string, a ...any) { e.logf("sandbox pod "+name+": "+f, a...) },
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox pod %s: supervisor: %w", name, err)
	}
	e.mu.Lock()
	e.clients[name] = c
	e.mu.Unlock()
	// A Pod that ended between the check and now.
	if gone, why := e.gone(name); gone {
		e.podEnded(name, why)
		return nil, fmt.Errorf("sandbox pod %s: %w: %s", name, ErrPodGone, why)
	}
	return c, nil
}

// attachConn is the Pod's attach stream as a supervisor.Conn: stdout
// carries the supervisor's frames, stdin the client's; its stderr is the
// supervisor's log.
type attachConn struct {
	out    *io.PipeReader
	in     *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{}
}

func (a *attachConn) Read(p []byte) (int, error)  { return a.out.Read(p) }
func (a *attachConn) Write(p []byte) (int, error) { return a.in.Write(p) }

// Close ends the stream: its stdin ends (EOF) and what is still in flight
// of its output is drained, not refused: client-go's copy loops report
// a read or write on a closed pipe as an unhandled error (a log line for
// every normal close otherwise). A Read waiting on the output ends with
// the stream, which ends with the context.
func (a *attachConn) Close() error {
	a.cancel()
	_ = a.in.Close()
	go func() { _, _ = io.Copy(io.Discard, a.out) }()
	return nil
}

// logWriter writes the supervisor's stderr to logf, line by line.
type logWriter struct {
	logf func(string, ...any)
	name string
}

func (w logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.logf("sandbox pod %s: %s", w.name, l)
	}
	return len(p), nil
}

// dialer attaches to the sandbox container of Pod name.
func (e *Engine) dialer(name string) supervisor.Dialer {
	return func(ctx context.Context) (supervisor.Conn, error) {
		if gone, why := e.gone(name); gone {
			return nil, fmt.Errorf("sandbox pod %s: %w: %s", name, ErrPodGone, why)
		}
		req := e.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(name).SubResource("attach").
			VersionedParams(&corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ex, err := remotecommand.NewSPDYExecutor(e.rc, "POST", req.URL())
		if err != nil {
			return nil, fmt.Errorf("attach to sandbox pod %s: %w", name, err)
		}
		sctx, cancel := context.WithCancel(context.Background())
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		a := &attachConn{out: outR, in: inW, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(a.done)
			err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: logWriter{e.logf, name}})
			if err == nil {
				err = io.EOF
			}
			_ = outW.CloseWithError(err)
			// The writer's side: a Write from now on fails, and
			// client-go's stdin copy reads an end, not a closed pipe.
			_ = inW.CloseWithError(io.EOF)
		}()
		return a, nil
	}
}

// Exec runs argv in the sandbox container of Pod name outside the
// supervisor (the Pod's exec API) and returns its combined output and
// exit code.
func (e *Engine) Exec(ctx context.Context, name string, argv []string) (string, int, error) {
	req := e.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: ContainerName, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(e.rc, "POST", req.URL())
	if err != nil {
		return "", 0, err
	}
	var out lockedBuffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return out.String(), ce.Code, nil
	}
	if err != nil {
		return out.String(), 0, fmt.Errorf("exec in sandbox pod %s: %w", name, err)
	}
	return out.String(), 0, nil
}

// lockedBuffer is one buffer for two streams copied into it at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartSpec is one command for a sandbox.
type StartSpec struct {
	Scope
	supervisor.OpenSpec
	// StartWait bounds the wait for the supervisor's answer (0: its default).
	StartWait time.Duration
}

// Started is a command started in a sandbox Pod.
type Started struct {
	Proc    *supervisor.Proc
	Client  *supervisor.Client
	Pod     string
	Warning string
}

// Start runs a command through the supervisor of the scope's Pod, with
// the Docker engine's at-most-once rules: an Open whose answer was lost is
// settled by asking the supervisor (List), never by running it again.
func (e *Engine) Start(ctx context.Context, spec StartSpec) (Started, error) {
	sb, err := e.Ensure(ctx, spec.Scope)
	if err != nil {
		return Started{}, err
	}
	c, err := e.client(ctx, sb.Pod)
	if err != nil {
		return Started{}, err
	}
	octx, cancel := ctx, context.CancelFunc(func() {})
	if spec.StartWait > 0 {
		octx, cancel = context.WithTimeout(ctx, spec.StartWait)
	}
	defer cancel()
	p, err := c.Open(octx, spec.OpenSpec)
	if errors.Is(err, supervisor.ErrNotSent) && errors.Is(err, supervisor.ErrClosed) {
		if c, err = e.client(ctx, sb.Pod); err != nil {
			return Started{}, err
		}
		p, err = c.Open(octx, spec.OpenSpec)
	}
	if err == nil {
		warn := ""
		if sb.Created {
			warn = e.warning
		}
		return Started{Proc: p, Client: c, Pod: sb.Pod, Warning: warn}, nil
	}
	switch {
	case errors.Is(err, supervisor.ErrRefused):
		return Started{}, fmt.Errorf("%w: the command could not start: %w", cerrdefs.ErrInvalidArgument, err)
	case errors.Is(err, supervisor.ErrNoAnswer), errors.Is(err, supervisor.ErrNotSent):
		return Started{}, fmt.Errorf("sandbox pod %s: %w: %w", sb.Pod, cerrdefs.ErrUnavailable, err)
	}
	return e.adoptUncertain(ctx, sb.Pod, spec.ID, err)
}

// ErrStartUncertain: the supervisor may or may not have started the
// command and cannot be asked; it is not run a second time.
var ErrStartUncertain = errors.New("the command may or may not have started (sandboxctl did not run it a second time; check its effects before running it again)")

// adoptUncertain settles an Open whose answer was lost: the session with
// the command's id is followed from its first byte; none means it never
// started (an error, since there is no other path to run it on here).
func (e *Engine) adoptUncertain(ctx context.Context, pod, id string, openErr error) (Started, error) {
	if id == "" || ctx.Err() != nil {
		return Started{}, fmt.Errorf("sandbox pod %s: %w (%w)", pod, ErrStartUncertain, openErr)
	}
	c, err := e.client(ctx, pod)
	if err != nil {
		return Started{}, fmt.Errorf("sandbox pod %s: %w (%v) and the supervisor cannot be asked: %w", pod, ErrStartUncertain, openErr, err)
	}
	infos, err := c.List(ctx)
	if err != nil {
		return Started{}, fmt.Errorf("sandbox pod %s: %w (%v) and the supervisor cannot be asked: %w", pod, ErrStartUncertain, openErr, err)
	}
	for _, in := range infos {
		if in.ID == id {
			p, err := c.Attach(ctx, in, 0, 0)
			if err != nil {
				return Started{}, fmt.Errorf("sandbox pod %s: follow the command the supervisor started: %w", pod, err)
			}
			return Started{Proc: p, Client: c, Pod: pod}, nil
		}
	}
	return Started{}, fmt.Errorf("sandbox pod %s: %w: the supervisor lost the request and did not start it: %w", pod, cerrdefs.ErrUnavailable, openErr)
}

// Forget drops a finished session from its Pod's supervisor.
func (e *Engine) Forget(ctx context.Context, pod, id string) error {
	c, err := e.client(ctx, pod)
	if err != nil {
		return err
	}
	return c.Forget(ctx, id)
}

// PodOf returns the running Pod of a scope, or "" when it has none.
func (e *Engine) PodOf(s Scope) string {
	return e.livePod(scopeHash(e.key(s)))
}
