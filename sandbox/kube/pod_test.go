package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestBuildPodHardening checks the spec of a sandbox Pod against
// docs/scale-out.md (TestPodHardening checks the running Pod).
func TestBuildPodHardening(t *testing.T) {
	cfg := sandboxconfig.DefaultConfig()
	cfg.Kubernetes.Enabled = true
	cfg.Kubernetes.RuntimeClassName = "gvisor"
	sh, err := shapeOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := buildPod(sh, "sbx-x", "ns", "", map[string]string{LabelScope: "h"}, nil)
	s := p.Spec
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false")
	}
	if s.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q", s.RestartPolicy)
	}
	if s.RuntimeClassName == nil || *s.RuntimeClassName != "gvisor" {
		t.Error("runtimeClassName not set")
	}
	if p.Labels[LabelManaged] != "1" || p.Labels[LabelScope] != "h" {
		t.Errorf("labels %v", p.Labels)
	}
	for _, c := range append(append([]corev1.Container{}, s.InitContainers...), s.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s: securityContext %+v", c.Name, sc)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, q := c.Resources.Limits[r], c.Resources.Requests[r]
			if l.IsZero() || l.Cmp(q) != 0 {
				t.Errorf("container %s: %s limit %v request %v, want equal and set", c.Name, r, l.String(), q.String())
			}
		}
	}
	main := s.Containers[0]
	if main.Image != cfg.Docker.Image || len(main.Command) != 1 || main.Command[0] != SupervisorBin || !main.Stdin || main.StdinOnce || main.TTY {
		t.Errorf("main container: image %q command %v stdin %v once %v tty %v", main.Image, main.Command, main.Stdin, main.StdinOnce, main.TTY)
	}
	mem := map[string]bool{}
	for _, v := range s.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
			t.Errorf("volume %s: not a sized emptyDir", v.Name)
			continue
		}
		mem[v.Name] = v.EmptyDir.Medium == corev1.StorageMediumMemory
	}
	if !mem["tmp"] || !mem["run"] || !mem["supervisor"] {
		t.Errorf("memory-backed volumes: %v", mem)
	}
	np := denyAllPolicy("ns")
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 || np.Spec.PodSelector.MatchLabels[LabelManaged] != "1" {
		t.Errorf("policy %+v does not deny all for every sandbox pod", np.Spec)
	}
}
