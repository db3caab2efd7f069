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
// policy: a target Pod under it and a control Pod outside it (nothing
// listens on either), and a client Pod outside it that connects to both.
// Enforced only when the control answers ("Connection refused": packets
// between Pods flow) and the target does not (its packets were dropped).
// Anything else cannot tell, and is reported as not shown.
func (e *Engine) probePolicy(ctx context.Context) (enforced bool, why string, err error) {
	suffix := randomSuffix()
	target, control, client := "sandboxctl-np-target-"+suffix, "sandboxctl-np-control-"+suffix, "sandboxctl-np-client-"+suffix
	defer e.deletePod(target)
	defer e.deletePod(control)
	defer e.deletePod(client)
	tl := maps.Clone(e.labels)
	tl[LabelProbe] = "target"
	outside := func(role string) map[string]string {
		l := map[string]string{LabelProbe: role} // no LabelManaged: outside the policy
		for k, v := range e.labels {
			if k != LabelManaged {
				l[k] = v
			}
		}
		return l
	}
	sleep := []string{"sleep", "60"}
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, e.probePod(target, tl, sleep), metav1.CreateOptions{}); err != nil {
		return false, "", classify(err)
	}
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, e.probePod(control, outside("control"), sleep), metav1.CreateOptions{}); err != nil {
		return false, "", classify(err)
	}
	tip, err := e.waitPodIP(ctx, target)
	if err != nil {
		return false, "", err
	}
	cip, err := e.waitPodIP(ctx, control)
	if err != nil {
		return false, "", err
	}
	script := "echo target; nc -w 3 " + tip + " 7 2>&1; echo control; nc -w 3 " + cip + " 7 2>&1; echo end"
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, e.probePod(client, outside("client"), []string{"sh", "-c", script}), metav1.CreateOptions{}); err != nil {
		return false, "", classify(err)
	}
	logs, err := e.waitLogs(ctx, client)
	if err != nil {
		return false, "", err
	}
	_, rest, _ := strings.Cut(logs, "target\n")
	toTarget, rest, _ := strings.Cut(rest, "control\n")
	toControl, _, _ := strings.Cut(rest, "end")
	answered := func(s string) bool { return strings.Contains(strings.ToLower(s), "refused") }
	dropped := func(s string) bool { return strings.Contains(strings.ToLower(s), "timed out") }
	switch {
	case answered(toControl) && dropped(toTarget):
		return true, "", nil
	case answered(toTarget):
		return false, fmt.Sprintf("a connection from a Pod outside the policy to a sandbox Pod (%s) was answered (%q)", tip, strings.TrimSpace(toTarget)), nil
	case !answered(toControl):
		return false, fmt.Sprintf("Pods outside the policy do not reach each other either (%q), so a dropped connection proves nothing", strings.TrimSpace(toControl)), nil
	}
	return false, fmt.Sprintf("the probe's connections gave %q", strings.TrimSpace(logs)), nil
}

// probePod is a hardened run-to-completion Pod of the supervisor image.
func (e *Engine) probePod(name string, lb map[string]string, cmd []string) *corev1.Pod {
	p := buildPod(e.shape, name, e.ns, "", nil, nil)
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
