package kube

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// LabelProbe marks the Pods of the NetworkPolicy probe.
const LabelProbe = "sandboxctl.io/probe"

// ensurePolicy puts the deny-all NetworkPolicy in place and, under
// networkPolicy: require, proves that the cluster enforces it (probe);
// under unenforced it only warns.
func (e *Engine) ensurePolicy(ctx context.Context, mode string) error {
	np := denyAllPolicy(e.ns)
	_, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur = np
		cur, err = e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, PolicyName, metav1.GetOptions{})
		if err == nil {
			cur.Spec = np.Spec
			_, err = e.cs.NetworkingV1().NetworkPolicies(e.ns).Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("the deny-all NetworkPolicy %s/%s: %w", e.ns, PolicyName, classify(err))
	}
	if mode == sandboxconfig.NetworkPolicyUnenforced {
		e.warning = "the cluster is not checked to enforce the deny-all NetworkPolicy of sandbox Pods (sandbox.kubernetes.networkPolicy: unenforced): a sandbox may reach the network"
		e.logf("warning: %s", e.warning)
		return nil
	}
	enforced, why, err := e.probePolicy(ctx)
	if err != nil {
		return fmt.Errorf("%w: the probe failed: %w", ErrNetworkPolicyUnverified, err)
	}
	if !enforced {
		return fmt.Errorf("%w: %s", ErrNetworkPolicyUnverified, why)
	}
	return nil
}

// probePolicy shows whether the network plugin enforces the deny-all
// policy: a target Pod under it (nothing listens there) and a client Pod
// outside it that connects to the target's IP. "Connection refused"
// means the target's kernel answered, so the packet went through: not
// enforced. A timeout means it was dropped: enforced.
func (e *Engine) probePolicy(ctx context.Context) (enforced bool, why string, err error) {
	suffix := randomSuffix()
	target := "sandboxctl-np-target-" + suffix
	client := "sandboxctl-np-client-" + suffix
	defer e.deletePod(target)
	defer e.deletePod(client)
	tl := maps.Clone(e.labels)
	tl[LabelProbe] = "target"
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, e.probePod(target, tl, []string{"sleep", "60"}), metav1.CreateOptions{}); err != nil {
		return false, "", classify(err)
	}
	ip, err := e.waitPodIP(ctx, target)
	if err != nil {
		return false, "", err
	}
	cl := map[string]string{LabelProbe: "client"} // no LabelManaged: outside the policy
	for k, v := range e.labels {
		if k != LabelManaged {
			cl[k] = v
		}
	}
	cmd := []string{"nc", "-w", "3", ip, "7"}
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, e.probePod(client, cl, cmd), metav1.CreateOptions{}); err != nil {
		return false, "", classify(err)
	}
	logs, err := e.waitLogs(ctx, client)
	if err != nil {
		return false, "", err
	}
	l := strings.ToLower(logs)
	switch {
	case strings.Contains(l, "refused"):
		return false, fmt.Sprintf("a connection from a Pod outside the policy to a sandbox Pod (%s) was answered (%q)", ip, strings.TrimSpace(logs)), nil
	case strings.Contains(l, "timed out"):
		return true, "", nil
	}
	return false, fmt.Sprintf("the probe's connection to a sandbox Pod gave %q, neither refused nor timed out", strings.TrimSpace(logs)), nil
}

// probePod is a hardened run-to-completion Pod of the supervisor image.
func (e *Engine) probePod(name string, lb map[string]string, cmd []string) *corev1.Pod {
	p := buildPod(e.shape, name, e.ns, nil, nil)
	p.Labels = lb
	p.Spec.InitContainers = nil
	c := &p.Spec.Containers[0]
	c.Image, c.Command, c.Args, c.Stdin = e.shape.SupervisorImage, cmd, nil, false
	c.Resources = corev1.ResourceRequirements{Limits: initResources, Requests: initResources}
	c.VolumeMounts = nil
	p.Spec.Volumes = nil
	return p
}

func (e *Engine) waitPodIP(ctx context.Context, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", classify(err)
		}
		if why := podStuck(p); why != "" {
			return "", fmt.Errorf("probe pod %s: %s", name, why)
		}
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p.Status.PodIP, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("probe pod %s did not start: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *Engine) waitLogs(ctx context.Context, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", classify(err)
		}
		if why := podStuck(p); why != "" {
			return "", fmt.Errorf("probe pod %s: %s", name, why)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			b, err := e.cs.CoreV1().Pods(e.ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			return string(b), classify(err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("probe pod %s did not finish: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
