package broker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// The files a sandbox is given, under the broker's directory.
const (
	// bundleFile is the host's system roots followed by the broker's CA:
	// mounted over the sandbox's system store and named by the usual
	// variables.
	bundleFile = "sandbox-bundle.pem"
)

// Where a sandbox sees the broker's files (docs/secrets.md).
const (
	// SandboxBundlePath is the system store of Debian-based images,
	// replaced by the bundle.
	SandboxBundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// SandboxCAPath holds the broker's CA alone (NODE_EXTRA_CA_CERTS adds
	// it to Node's own roots).
	SandboxCAPath = "/etc/sandboxctl/broker-ca.pem"
)

// systemBundles are where host systems keep their roots as one PEM file.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, macOS
}

// Dir is the broker's directory under a daemon's state directory.
func Dir(stateDir string) string { return filepath.Join(stateDir, "broker") }

// SandboxSide is what every sandbox gets when secrets are configured: the
// placeholder variables and the trust of the broker's CA.
type SandboxSide struct {
	// Env is the placeholder of each secret by variable, plus the CA
	// variables (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, ...).
	Env map[string]string `json:"env"`
	// BundleFile and CAFile are host paths, mounted read-only at
	// SandboxBundlePath and SandboxCAPath.
	BundleFile string `json:"bundleFile"`
	CAFile     string `json:"caFile"`
}

// Prepare loads or creates the broker's CA and placeholder key under dir
// and writes the bundle; it reads no secret's value, so any program that
// creates sandboxes computes the same side as the daemon.
func Prepare(dir string, secrets []sandboxconfig.Secret) (SandboxSide, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return SandboxSide{}, fmt.Errorf("broker: %w", err)
	}
	ph, err := loadOrCreatePlaceholderKey(dir)
	if err != nil {
		return SandboxSide{}, err
	}
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		return SandboxSide{}, err
	}
	var system []byte
	for _, p := range systemBundles {
		if system, err = os.ReadFile(p); err == nil {
			break
		}
	}
	if len(system) == 0 {
		return SandboxSide{}, fmt.Errorf("broker: no system CA bundle on this host (looked at %v): a sandbox trusting the broker's CA alone could reach no other HTTPS host", systemBundles)
	}
	bundle := append(append(bytes.TrimRight(system, "\n"), '\n'), ca.CertPEM()...)
	bundlePath := filepath.Join(dir, bundleFile)
	if err := writeIfChanged(bundlePath, bundle); err != nil {
		return SandboxSide{}, err
	}
	// The directory is 0700 (the CA key is in it); the sandbox's files
	// are mounted by the Engine, which runs as root.
	env := map[string]string{
		"SSL_CERT_FILE":       SandboxBundlePath,
		"REQUESTS_CA_BUNDLE":  SandboxBundlePath,
		"CURL_CA_BUNDLE":      SandboxBundlePath,
		"GIT_SSL_CAINFO":      SandboxBundlePath,
		"NODE_EXTRA_CA_CERTS": SandboxCAPath,
	}
	for _, s := range secrets {
		env[s.Env] = ph.of(s.Name)
	}
	return SandboxSide{Env: env, BundleFile: bundlePath, CAFile: filepath.Join(dir, caCertFile)}, nil
}

func writeIfChanged(path string, data []byte) error {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}
