package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxctl/sandboxctl/envguard"
)

// Labels and annotations of sandbox Pods.
const (
	// LabelManaged marks every Pod this engine made (the NetworkPolicy's
	// selector, the watch's).
	LabelManaged = "sandboxctl.io/managed"
	// LabelScope is the hash of the sandbox's scope key (scopeHash); a
	// pooled Pod has LabelPool instead until it is claimed.
	LabelScope = "sandboxctl.io/scope"
	// LabelPool is "ready" on a warm Pod not yet claimed.
	LabelPool = "sandboxctl.io/pool"
	// AnnotationAgent and AnnotationSessionKey name the Pod's owner: a
	// recovered session's owner is taken from them, never from what the
	// session's own metadata says.
	AnnotationAgent      = "sandboxctl.io/agent-id"
	AnnotationSessionKey = "sandboxctl.io/session-key"
	// AnnotationPausedAt, on a workspace claim, says since when (RFC 3339)
	// its sandbox is paused: its Pod deleted, the claim kept.
	AnnotationPausedAt = "sandboxctl.io/paused-at"
)

// Paths in the sandbox container.
const (
	// SupervisorDir is the memory-backed volume the init container copies
	// the supervisor into; SupervisorBin is the binary there.
	SupervisorDir = "/.sandboxctl"
	SupervisorBin = SupervisorDir + "/supervisor"
	// Workspace is the sandbox's working directory (its volume).
	Workspace = "/workspace"
	// ContainerName is the sandbox container of the Pod.
	ContainerName = "sandbox"
)

// PolicyName is the deny-all NetworkPolicy of the namespace's sandbox Pods.
const PolicyName = "sandboxctl-deny-all"

// podShape is what a sandbox Pod is made of, parsed from the config once.
type podShape struct {
	Image     string
	Env       map[string]string
	Memory    resource.Quantity
	CPU       resource.Quantity
	Workspace resource.Quantity
	// StorageClass, when set, makes the workspace a PersistentVolumeClaim
	// of that class (buildClaim) instead of an emptyDir.
	StorageClass     string
	Tmp, Run         resource.Quantity
	RunAsUser        int64
	RuntimeClassName string
	SupervisorImage  string
	SupervisorPath   string
	Labels           map[string]string
}

// initResources bound the init container that copies the supervisor.
var initResources = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("100m"),
	corev1.ResourceMemory: resource.MustParse("32Mi"),
}

// claimName is the name of the workspace claim of scope hash h.
func claimName(h string) string { return "sbx-ws-" + h }

// buildClaim is the workspace PersistentVolumeClaim of one sandbox (with
// sh.StorageClass): ReadWriteOnce, of the workspace size.
func buildClaim(sh podShape, name, namespace string, labels, annotations map[string]string) *corev1.PersistentVolumeClaim {
	all := map[string]string{}
	for k, v := range labels {
		all[k] = v
	}
	all[LabelManaged] = "1"
	sc := sh.StorageClass
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: all, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: sh.Workspace}},
		},
	}
}

// buildPod is the Pod of one sandbox: the user's image unchanged, the
// supervisor as its main process (pid 1, reached over the attach stream),
// hardened as docs/scale-out.md says. Its workspace is the claim named
// claim, or an emptyDir when claim is "".
func buildPod(sh podShape, name, namespace, claim string, labels, annotations map[string]string) *corev1.Pod {
	yes, no := true, false
	uid := sh.RunAsUser
	grace := int64(2)
	all := map[string]string{}
	for k, v := range sh.Labels {
		all[k] = v
	}
	for k, v := range labels {
		all[k] = v
	}
	all[LabelManaged] = "1"
	limits := corev1.ResourceList{corev1.ResourceMemory: sh.Memory, corev1.ResourceCPU: sh.CPU}
	ctrSec := &corev1.SecurityContext{
		RunAsNonRoot:             &yes,
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		AllowPrivilegeEscalation: &no,
		Privileged:               &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	// The supervisor's environment is every command's base (as in a
	// Docker sandbox: PATH, HOME, sandbox.docker.env).
	base := envguard.Merge([]string{"PATH=" + envguard.DefaultSandboxPath, "HOME=" + Workspace}, sh.Env)
	env := make([]corev1.EnvVar, 0, len(base))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	memDir := func(size resource.Quantity) corev1.VolumeSource {
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}
	}
	ws := sh.Workspace
	workspace := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &ws}}
	if claim != "" {
		workspace = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
	}
	supSize := resource.MustParse("32Mi")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: all, Annotations: annotations},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				FSGroup:        &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:            "supervisor",
				Image:           sh.SupervisorImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"cp", sh.SupervisorPath, SupervisorBin},
				Resources:       corev1.ResourceRequirements{Limits: initResources, Requests: initResources},
				SecurityContext: ctrSec,
				VolumeMounts:    []corev1.VolumeMount{{Name: "supervisor", MountPath: SupervisorDir}},
			}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           sh.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				// The image's ENTRYPOINT must not wrap the supervisor.
				Command:    []string{SupervisorBin},
				Args:       []string{},
				WorkingDir: Workspace,
				Env:        env,
				// The attach stream: stdin stays open across attaches.
				Stdin: true, StdinOnce: false, TTY: false,
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits},
				SecurityContext: ctrSec,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "supervisor", MountPath: SupervisorDir, ReadOnly: true},
					{Name: "workspace", MountPath: Workspace},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "run", MountPath: "/run"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "supervisor", VolumeSource: memDir(supSize)},
				{Name: "workspace", VolumeSource: workspace},
				{Name: "tmp", VolumeSource: memDir(sh.Tmp)},
				{Name: "run", VolumeSource: memDir(sh.Run)},
			},
		},
	}
	if sh.RuntimeClassName != "" {
		rc := sh.RuntimeClassName
		p.Spec.RuntimeClassName = &rc
	}
	return p
}

// denyAllPolicy selects every sandbox Pod of the namespace and allows no
// traffic in or out.
func denyAllPolicy(namespace string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Namespace: namespace, Labels: map[string]string{LabelManaged: "1"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "1"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// quantity parses a size such as 1g (the config's units) as a Quantity.
func quantity(field string, bytes int64) (resource.Quantity, error) {
	if bytes <= 0 {
		return resource.Quantity{}, fmt.Errorf("%s: must be above 0", field)
	}
	return *resource.NewQuantity(bytes, resource.BinarySI), nil
}
