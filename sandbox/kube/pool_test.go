package kube_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxctl/sandboxctl/sandbox/kube"
)

// TestPoolClaim: a new agent's first command takes the warm Pod (the same
// Pod, relabelled for the agent, not a new one), and the pool refills.
func TestPoolClaim(t *testing.T) {
	kc := cluster(t)
	cs := clientset(t, kc)
	ns := namespace(t, cs)
	d := newDaemon(t, testConfig(kc, ns), filepath.Join(t.TempDir(), "cursors.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.e.StartPool(ctx, 1)
	warm := ""
	for deadline := time.Now().Add(2 * time.Minute); warm == ""; time.Sleep(50 * time.Millisecond) {
		if d.e.PoolReady() {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPool + "=" + kube.PoolReady})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) == 1 {
				warm = l.Items[0].Name
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no warm pod within 2 min")
		}
	}
	startBackground(t, d, "pooled", "echo hi", "hi")
	got := d.e.PodOf(kube.Scope{AgentID: "pooled"})
	if got != warm {
		t.Fatalf("the agent's sandbox is pod %q, want the warm pod %q", got, warm)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, got, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Labels[kube.LabelPool] != "" || p.Labels[kube.LabelScope] == "" || p.Annotations[kube.AnnotationAgent] != "pooled" {
		t.Errorf("claimed pod labels %v annotations %v", p.Labels, p.Annotations)
	}
	for deadline := time.Now().Add(2 * time.Minute); !d.e.PoolReady(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not refill within 2 min")
		}
	}
}
