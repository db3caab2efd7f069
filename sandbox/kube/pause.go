package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
)

// ErrPauseNeedsClaim: a sandbox whose workspace is an emptyDir cannot be
// paused (its files go with its Pod).
var ErrPauseNeedsClaim = fmt.Errorf("%w: pause needs sandbox.kubernetes.workspaceStorageClass (without it the workspace is an emptyDir, removed with the pod)", cerrdefs.ErrFailedPrecondition)

// ReasonPaused is why the sessions of a sandbox that is paused end.
const ReasonPaused = "the sandbox was paused: its pod was deleted, its workspace kept"

// ensureClaim returns the workspace claim of scope hash h, making it when
// there is none; made says it made it.
func (e *Engine) ensureClaim(ctx context.Context, h string, lb, ann map[string]string) (c *corev1.PersistentVolumeClaim, made bool, err error) {
	claims := e.cs.CoreV1().PersistentVolumeClaims(e.ns)
	c, err = claims.Get(ctx, claimName(h), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c, err = claims.Create(ctx, buildClaim(e.shape, claimName(h), e.ns, lb, ann), metav1.CreateOptions{})
		made = err == nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("sandbox workspace claim %s: %w", claimName(h), classify(err))
	}
	if !e.selector.Matches(labels.Set(c.Labels)) {
		return nil, false, fmt.Errorf("%w: claim %s in namespace %s is not this daemon's", cerrdefs.ErrConflict, c.Name, e.ns)
	}
	if c.DeletionTimestamp != nil {
		return nil, false, fmt.Errorf("%w: the workspace claim %s of this sandbox is being deleted; try again when it is gone", cerrdefs.ErrUnavailable, c.Name)
	}
	return c, made, nil
}

// setPausedAt sets (at non-zero) or clears the paused mark of claim name.
func (e *Engine) setPausedAt(ctx context.Context, name string, at time.Time) error {
	claims := e.cs.CoreV1().PersistentVolumeClaims(e.ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, marked := c.Annotations[AnnotationPausedAt]
		switch {
		case at.IsZero() && !marked, !at.IsZero() && marked:
			return nil
		case at.IsZero():
			delete(c.Annotations, AnnotationPausedAt)
		default:
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[AnnotationPausedAt] = at.UTC().Format(time.RFC3339)
		}
		_, err = claims.Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
}

// markResumed clears the paused mark of a claim whose new Pod runs.
func (e *Engine) markResumed(ctx context.Context, claim string) error {
	if err := e.setPausedAt(ctx, claim, time.Time{}); err != nil {
		return fmt.Errorf("workspace claim %s: clear the paused mark: %w", claim, classify(err))
	}
	return nil
}

// deleteClaim deletes the workspace claim of scope hash h (the cluster
// keeps it until no Pod uses it).
func (e *Engine) deleteClaim(ctx context.Context, h string) error {
	err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, claimName(h), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete workspace claim %s: %w", claimName(h), classify(err))
	}
	return nil
}

// Pause scales the scope's sandbox to zero: its claim is marked paused,
// its Pod deleted (the sessions in it end with ReasonPaused) and waited
// for, so nothing writes the workspace any more when Pause returns. The
// next Ensure (a command) or Resume makes a Pod on the same claim.
func (e *Engine) Pause(ctx context.Context, s Scope) error {
	if e.shape.StorageClass == "" {
		return ErrPauseNeedsClaim
	}
	h := scopeHash(e.key(s))
	defer e.lockScope(h)()
	c, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, claimName(h), metav1.GetOptions{})
	if err == nil && !e.selector.Matches(labels.Set(c.Labels)) {
		err = apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), claimName(h))
	}
	if apierrors.IsNotFound(err) && e.livePod(h) != "" {
		return fmt.Errorf("%w: pause: the sandbox's workspace is an emptyDir (its pod was made before sandbox.kubernetes.workspaceStorageClass was set); remove it to get one with a claim", cerrdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return fmt.Errorf("pause: no sandbox for this scope: %w", classify(err))
	}
	if err := e.setPausedAt(ctx, c.Name, time.Now()); err != nil {
		return fmt.Errorf("pause: mark workspace claim %s: %w", c.Name, classify(err))
	}
	pods, err := e.pods.List(labels.SelectorFromSet(labels.Set{LabelScope: h}))
	if err != nil {
		return err
	}
	var errs []error
	var names []string
	for _, p := range pods {
		if !e.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		// Its sessions end now, saying why, before the delete event.
		e.podEnded(p.Name, ReasonPaused)
		if err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("pause: delete pod %s: %w", p.Name, classify(err)))
			continue
		}
		names = append(names, p.Name)
	}
	for _, name := range names {
		errs = append(errs, e.waitDeleted(ctx, name))
	}
	return errors.Join(errs...)
}

// waitDeleted waits until Pod name is gone from the API (its containers
// stopped: the kubelet confirmed it).
func (e *Engine) waitDeleted(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pause: pod %s still there: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Resume makes the Pod of a paused sandbox again, on its workspace claim
// (what the next command's Ensure does too). A sandbox that runs is left
// as it is.
func (e *Engine) Resume(ctx context.Context, s Scope) error {
	if e.shape.StorageClass == "" {
		return ErrPauseNeedsClaim
	}
	h := scopeHash(e.key(s))
	c, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, claimName(h), metav1.GetOptions{})
	if err == nil && !e.selector.Matches(labels.Set(c.Labels)) {
		err = apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), claimName(h))
	}
	if err != nil {
		return fmt.Errorf("resume: no sandbox for this scope: %w", classify(err))
	}
	_, err = e.Ensure(ctx, s)
	return err
}

// SandboxState is one sandbox of this Engine as List sees it.
type SandboxState struct {
	// ScopeHash is the sandbox's LabelScope value.
	ScopeHash           string
	AgentID, SessionKey string
	// Pod is its Pod that has not ended; "" while it is paused.
	Pod string
	// Claim is its workspace claim ("" with an emptyDir workspace).
	Claim string
	// Paused: a claim and no Pod. PausedAt is when Pause marked it (zero
	// when the Pod went otherwise).
	Paused   bool
	PausedAt time.Time
}

// List lists this Engine's sandboxes: every scope with a Pod that has not
// ended or a workspace claim, sorted by scope hash (warm Pods are not
// sandboxes yet).
func (e *Engine) List(ctx context.Context) ([]SandboxState, error) {
	pods, err := e.pods.List(e.selector)
	if err != nil {
		return nil, err
	}
	by := map[string]*SandboxState{}
	for _, p := range pods {
		h := p.Labels[LabelScope]
		if h == "" {
			continue
		}
		if gone, _ := e.podGone(p); gone {
			continue
		}
		by[h] = &SandboxState{ScopeHash: h, AgentID: p.Annotations[AnnotationAgent], SessionKey: p.Annotations[AnnotationSessionKey], Pod: p.Name}
	}
	if e.shape.StorageClass != "" {
		claims, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{LabelSelector: e.selector.String()})
		if err != nil {
			return nil, fmt.Errorf("list workspace claims: %w", classify(err))
		}
		for _, c := range claims.Items {
			h := c.Labels[LabelScope]
			if h == "" || c.DeletionTimestamp != nil {
				continue
			}
			st := by[h]
			if st == nil {
				st = &SandboxState{ScopeHash: h, AgentID: c.Annotations[AnnotationAgent], SessionKey: c.Annotations[AnnotationSessionKey], Paused: true}
				by[h] = st
				if at, err := time.Parse(time.RFC3339, c.Annotations[AnnotationPausedAt]); err == nil {
					st.PausedAt = at
				}
			}
			st.Claim = c.Name
		}
	}
	out := make([]SandboxState, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ScopeHash < out[j].ScopeHash })
	return out, nil
}
