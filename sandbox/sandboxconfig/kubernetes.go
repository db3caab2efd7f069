package sandboxconfig

import (
	"fmt"
	"regexp"
	"sync"

	"github.com/docker/go-units"
)

// KubernetesConfig is sandbox.kubernetes: sandboxes as Pods of a
// Kubernetes cluster (package sandbox/kube, docs/scale-out.md) instead of
// containers of a Docker Engine. The image, memory and cpus come from
// sandbox.docker.
type KubernetesConfig struct {
	// Enabled selects the Kubernetes engine for the sandbox host.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Kubeconfig is the kubeconfig file to use; "" is the in-cluster
	// configuration (the service account of the daemon's Pod).
	Kubeconfig string `yaml:"kubeconfig" json:"kubeconfig,omitempty"`
	// Namespace holds the sandbox Pods and their NetworkPolicy.
	Namespace string `yaml:"namespace" json:"namespace"`
	// RuntimeClassName is the Pods' RuntimeClass ("": the cluster's default).
	RuntimeClassName string `yaml:"runtimeClassName" json:"runtimeClassName,omitempty"`
	// SupervisorImage is an image already on the nodes that holds the
	// static supervisor binary at SupervisorPath and a cp command: an init
	// container copies it into a memory-backed volume of the Pod, so the
	// sandbox image stays the user's, unchanged.
	SupervisorImage string `yaml:"supervisorImage" json:"supervisorImage"`
	SupervisorPath  string `yaml:"supervisorPath" json:"supervisorPath"`
	// RunAsUser is the uid (and gid) of every container of a sandbox Pod;
	// never 0.
	RunAsUser int64 `yaml:"runAsUser" json:"runAsUser"`
	// WorkspaceSize caps the workspace volume at /workspace: the sizeLimit
	// of an emptyDir on the node's disk (removed with the Pod), or the
	// request of its PersistentVolumeClaim (WorkspaceStorageClass).
	WorkspaceSize string `yaml:"workspaceSize" json:"workspaceSize"`
	// WorkspaceStorageClass, when set, gives each sandbox a
	// PersistentVolumeClaim of that StorageClass for /workspace instead of
	// an emptyDir: the workspace outlives the Pod, so a sandbox can be
	// paused (its Pod deleted) and resumed on the same files. Sandboxes
	// with one are not taken from the warm pool.
	WorkspaceStorageClass string `yaml:"workspaceStorageClass" json:"workspaceStorageClass,omitempty"`
	// NetworkPolicy says what happens when the cluster's network plugin
	// cannot be shown to enforce the deny-all NetworkPolicy of the sandbox
	// Pods: "require" refuses to start sandboxes, "unenforced" starts them
	// with the policy in place and a warning.
	NetworkPolicy string `yaml:"networkPolicy" json:"networkPolicy"`
	// Labels are added to every sandbox Pod.
	Labels map[string]string `yaml:"labels" json:"labels,omitempty"`
}

// Values of KubernetesConfig.NetworkPolicy.
const (
	NetworkPolicyRequire    = "require"
	NetworkPolicyUnenforced = "unenforced"
)

// DefaultKubernetes is sandbox.kubernetes's default (disabled).
func DefaultKubernetes() KubernetesConfig {
	return KubernetesConfig{
		Namespace:       "sandboxctl",
		SupervisorImage: "sandboxctl/sandboxctld:dev",
		SupervisorPath:  "/usr/local/lib/sandboxctl/sandboxctl-supervisor",
		RunAsUser:       1000,
		WorkspaceSize:   "1g",
		NetworkPolicy:   NetworkPolicyRequire,
		Labels:          map[string]string{},
	}
}

// dnsLabel is a Kubernetes namespace name (RFC 1123 label).
var dnsLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`) })

// dnsSubdomain is an object name such as a StorageClass's (RFC 1123
// subdomain).
var dnsSubdomain = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
})

// Validate checks sandbox.kubernetes (only when enabled).
func (k KubernetesConfig) Validate() error {
	if !k.Enabled {
		return nil
	}
	const f = "sandbox.kubernetes."
	if !dnsLabel().MatchString(k.Namespace) {
		return &ConfigError{Field: f + "namespace", Value: k.Namespace, Msg: "must be a namespace name (lower-case letters, digits, '-')"}
	}
	if k.RuntimeClassName != "" && !dnsLabel().MatchString(k.RuntimeClassName) {
		return &ConfigError{Field: f + "runtimeClassName", Value: k.RuntimeClassName, Msg: "must be a RuntimeClass name"}
	}
	if k.SupervisorImage == "" {
		return &ConfigError{Field: f + "supervisorImage", Msg: "must name an image on the nodes that holds the supervisor"}
	}
	if len(k.SupervisorPath) < 2 || k.SupervisorPath[0] != '/' {
		return &ConfigError{Field: f + "supervisorPath", Value: k.SupervisorPath, Msg: "must be an absolute path in supervisorImage"}
	}
	if k.RunAsUser <= 0 {
		return &ConfigError{Field: f + "runAsUser", Value: fmt.Sprint(k.RunAsUser), Msg: "must be a uid above 0: sandbox Pods never run as root"}
	}
	if n, err := units.RAMInBytes(k.WorkspaceSize); err != nil || n <= 0 {
		return &ConfigError{Field: f + "workspaceSize", Value: k.WorkspaceSize, Msg: "must be a size above 0, such as 1g"}
	}
	if k.WorkspaceStorageClass != "" && !dnsSubdomain().MatchString(k.WorkspaceStorageClass) {
		return &ConfigError{Field: f + "workspaceStorageClass", Value: k.WorkspaceStorageClass, Msg: "must be a StorageClass name (lower-case letters, digits, '-', '.')"}
	}
	switch k.NetworkPolicy {
	case NetworkPolicyRequire, NetworkPolicyUnenforced:
	default:
		return &ConfigError{Field: f + "networkPolicy", Value: k.NetworkPolicy, Msg: "must be require or unenforced"}
	}
	return nil
}
