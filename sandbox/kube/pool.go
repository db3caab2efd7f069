package kube

import (
	"context"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PoolReady is LabelPool's value on a warm Pod waiting to be claimed.
const PoolReady = "ready"

// StartPool keeps size started sandbox Pods ready (sandbox.pool.size): the
// first command of a new scope claims one by relabelling it instead of
// waiting for a Pod to start. It runs until ctx ends or the Engine is
// closed. Only sandboxes with an emptyDir workspace come from the pool.
func (e *Engine) StartPool(ctx context.Context, size int) {
	if size <= 0 {
		return
	}
	if e.shape.StorageClass != "" {
		// A running Pod cannot be given a volume: with a claim per
		// workspace, every sandbox's Pod is made for it.
		e.logf("warm pool (sandbox.pool.size %d) not used: sandboxes with sandbox.kubernetes.workspaceStorageClass get their Pod with their own workspace claim", size)
		return
	}
	e.poolSize = size
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.stopped, cancel)
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer stop()
		defer cancel()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			e.fillPool(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-e.poolKick:
			}
		}
	}()
}

// poolSelector selects this Engine's unclaimed warm Pods.
func (e *Engine) poolSelector() labels.Selector {
	set := labels.Set{LabelPool: PoolReady}
	for k, v := range e.selectorSet {
		set[k] = v
	}
	return set.AsSelector()
}

// fillPool creates warm Pods up to the pool's size.
func (e *Engine) fillPool(ctx context.Context) {
	pods, err := e.pods.List(e.poolSelector())
	if err != nil {
		return
	}
	n := 0
	for _, p := range pods {
		if ended, _ := podEnded(p); ended {
			e.deletePod(p.Name)
			continue
		}
		n++
		// Connected ahead: the Pod keeps its name when it is claimed, so
		// the first command of its agent finds the supervisor connection
		// made (the attach stream's set-up is most of a cold command).
		if containerRunning(p) && !e.connected(p.Name) {
			if _, err := e.client(ctx, p.Name); err != nil {
				e.logf("warm pool: connect to %s: %v", p.Name, err)
			}
		}
	}
	for ; n < e.poolSize && ctx.Err() == nil; n++ {
		lb := maps.Clone(e.labels)
		lb[LabelPool] = PoolReady
		name := "sbx-pool-" + randomSuffix()
		if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, buildPod(e.shape, name, e.ns, "", lb, nil), metav1.CreateOptions{}); err != nil {
			e.logf("warm pool: create pod: %v", classify(err))
			return
		}
	}
}

// claim takes a running warm Pod for scope hash h: its pool label goes,
// the scope label and the owner's annotations come, in one update that
// fails if another claim changed it first (resourceVersion). It returns
// "" when none is ready.
func (e *Engine) claim(ctx context.Context, h string, s Scope) string {
	if e.poolSize == 0 {
		return ""
	}
	pods, err := e.pods.List(e.poolSelector())
	if err != nil {
		return ""
	}
	defer e.kickPool()
	for _, cached := range pods {
		if ended, _ := podEnded(cached); ended || !containerRunning(cached) {
			continue
		}
		p := cached.DeepCopy()
		delete(p.Labels, LabelPool)
		p.Labels[LabelScope] = h
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationAgent], p.Annotations[AnnotationSessionKey] = s.AgentID, s.SessionKey
		if _, err := e.cs.CoreV1().Pods(e.ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				e.logf("warm pool: claim %s: %v", p.Name, fmt.Errorf("%w", classify(err)))
			}
			continue
		}
		return p.Name
	}
	return ""
}

// PoolReady says whether a warm Pod is ready to be claimed now: it runs
// and its supervisor connection is made.
func (e *Engine) PoolReady() bool {
	pods, err := e.pods.List(e.poolSelector())
	if err != nil {
		return false
	}
	for _, p := range pods {
		if ended, _ := podEnded(p); !ended && containerRunning(p) && e.connected(p.Name) {
			return true
		}
	}
	return false
}

// connected says whether this Engine holds a live supervisor connection
// to Pod name.
func (e *Engine) connected(name string) bool {
	e.mu.Lock()
	c := e.clients[name]
	e.mu.Unlock()
	return c != nil && c.Err() == nil
}

// kickPool asks the warm pool to look again now (a warm Pod started, or
// one was claimed).
func (e *Engine) kickPool() {
	select {
	case e.poolKick <- struct{}{}:
	default:
	}
}
