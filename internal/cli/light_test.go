package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// lightForbidden are the packages the light sandboxctl must not link: the
// HTTP and TLS stacks (its client speaks HTTP/1.1 on the socket by hand,
// internal/apiclient) and the runtime, which sandboxctld carries. Each
// costs every `sandboxctl exec` start-up time and size.
var lightForbidden = []string{
	"net/http",
	"net/http/httputil",
	"crypto/tls",
	"crypto/x509",
	"github.com/sandboxctl/sandboxctl/internal/daemon",
	"github.com/sandboxctl/sandboxctl/internal/runtimecli",
	"github.com/sandboxctl/sandboxctl/internal/console",
	"github.com/sandboxctl/sandboxctl/internal/mcpserver",
	"github.com/sandboxctl/sandboxctl/internal/metrics",
	"github.com/sandboxctl/sandboxctl/sandbox",
	"github.com/sandboxctl/sandboxctl/sessions",
	"github.com/moby/moby/client",
	"k8s.io/client-go/kubernetes",
	"k8s.io/apimachinery/pkg/runtime",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/modelcontextprotocol/go-sdk/mcp",
	// The gateway's guard (Landlock, seccomp, PTYs): its package inits
	// cost every start; the configuration needs none of it.
	"github.com/sandboxctl/sandboxctl/hostexec",
	"github.com/landlock-lsm/go-landlock/landlock",
	"github.com/elastic/go-seccomp-bpf",
	"github.com/creack/pty",
	// The audit log (its hashing and signing): a configuration names
	// only its policy (internal/audit/policy).
	"github.com/sandboxctl/sandboxctl/internal/audit",
	"crypto/ed25519",
}

// TestLightCLIDependencies keeps the light sandboxctl binary
// (cmd/sandboxctl: package cli and what it imports) free of the packages
// it must not link, whatever CGO_ENABLED says.
func TestLightCLIDependencies(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, cgo := range []string{"0", "1"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/sandboxctl")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./cmd/sandboxctl (CGO_ENABLED=%s): %v", cgo, err)
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			deps[p] = true
		}
		if !deps["github.com/sandboxctl/sandboxctl/internal/cli"] {
			t.Fatalf("go list -deps ./cmd/sandboxctl does not list internal/cli:\n%s", out)
		}
		for _, p := range lightForbidden {
			if deps[p] {
				t.Errorf("CGO_ENABLED=%s: the light sandboxctl links %s (see `go list -deps ./cmd/sandboxctl` for the path)", cgo, p)
			}
		}
	}
}
