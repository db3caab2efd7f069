package kube

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// nodeLost says whether node n is lost, and why: the node lifecycle
// controller writes its Ready condition Unknown when the kubelet stopped
// posting status (node-monitor-grace-period). False (the kubelet says it
// is not ready) is not lost: the kubelet answers, and the Pods' own status
// tells what happened to them.
func nodeLost(n *corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
			return true, fmt.Sprintf("the pod's node %s was lost (%s: %s)", n.Name, c.Reason, c.Message)
		}
	}
	return false, ""
}

// startNodeWatch watches the cluster's Nodes, when this daemon may (a
// ClusterRole to get, list and watch nodes; docs/scale-out.md): the
// sessions of the Pods on a node that is lost or deleted fail at once,
// with the reason, and their scopes get a new Pod. Without the permission
// a lost node is seen when its Pods are evicted or deleted.
func (e *Engine) startNodeWatch(ctx context.Context) error {
	if _, err := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsForbidden(err) {
			e.logf("warning: this daemon may not watch nodes (%v): the sessions in a sandbox pod whose node is lost end only when the pod is evicted or deleted", err)
			return nil
		}
		return fmt.Errorf("list nodes: %w", classify(err))
	}
	f := informers.NewSharedInformerFactory(e.cs, 0)
	inf := f.Core().V1().Nodes().Informer()
	check := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			if lost, why := nodeLost(n); lost {
				e.nodeLost(n.Name, why)
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				e.nodeLost(n.Name, fmt.Sprintf("the pod's node %s was deleted", n.Name))
			}
		},
	})
	if err != nil {
		return err
	}
	e.informers = append(e.informers, f)
	f.Start(e.stopped.Done())
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
		return fmt.Errorf("%w: the watch of nodes did not sync", cerrdefs.ErrUnavailable)
	}
	return nil
}

// nodeLost ends the sandbox Pods on node: their sessions fail with why,
// and each is deleted (gracefully: on a node that comes back its kubelet
// stops it), so its scope's next command gets a new Pod.
func (e *Engine) nodeLost(node, why string) {
	pods, err := e.pods.List(e.selector)
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		if gone, _ := e.podGone(p); gone {
			continue
		}
		e.podEnded(p.Name, why)
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			ctx, cancel := context.WithTimeout(e.stopped, 10*time.Second)
			defer cancel()
			if err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				e.logf("sandbox pod %s on lost node %s: delete: %v", p.Name, node, err)
			}
		}()
	}
}
