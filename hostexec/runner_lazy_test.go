package hostexec

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestLoginProbeOnFirstUse: NewRunner does not run the login shell (a
// daemon whose commands all go to sandboxes never pays for the profile);
// the first use of PATH does, once.
func TestLoginProbeOnFirstUse(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "probed")
	shell := filepath.Join(dir, "sh")
	script := "#!/bin/sh\necho x >> " + marker + "\nexec /bin/sh \"$@\"\n"
	if err := os.WriteFile(shell, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(context.Background(), Options{Shell: shell, Environ: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("NewRunner ran the login shell: %v", err)
	}
	if p := r.Path(); p == "" {
		t.Fatal("empty PATH")
	}
	_ = r.BaseEnv()
	b, err := os.ReadFile(marker)
	if err != nil || string(b) != "x\n" {
		t.Fatalf("the login shell ran %q times (%v), want once", b, err)
	}
}
