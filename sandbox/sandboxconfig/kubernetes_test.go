package sandboxconfig

import (
	"errors"
	"testing"
)

// TestKubernetesWorkspaceStorageClass: a StorageClass name is checked
// where the config enters, with the key named.
func TestKubernetesWorkspaceStorageClass(t *testing.T) {
	for _, tc := range []struct {
		class string
		ok    bool
	}{
		{"", true}, {"standard", true}, {"fast.ssd-1", true},
		{"Fast", false}, {"-x", false}, {"a b", false}, {"x.", false},
	} {
		k := DefaultKubernetes()
		k.Enabled = true
		k.WorkspaceStorageClass = tc.class
		err := k.Validate()
		var ce *ConfigError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: %v", tc.class, err)
		case !tc.ok && (!errors.As(err, &ce) || ce.Field != "sandbox.kubernetes.workspaceStorageClass"):
			t.Errorf("%q: %v, want a ConfigError on sandbox.kubernetes.workspaceStorageClass", tc.class, err)
		}
	}
}
