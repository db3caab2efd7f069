package sandboxconfig

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxctl/sandboxctl/envguard"
)

// SecretConfig is one entry of sandbox.secrets (docs/secrets.md): a value
// the daemon reads from its own environment (FromEnv) or a file (FromFile),
// never from a request, sent by the egress proxy only to Hosts. The sandbox
// sees a placeholder in its variable Env instead of the value.
type SecretConfig struct {
	FromEnv  string   `yaml:"fromEnv" json:"fromEnv,omitempty"`
	FromFile string   `yaml:"fromFile" json:"fromFile,omitempty"`
	Hosts    []string `yaml:"hosts" json:"hosts"`
	Env      string   `yaml:"env" json:"env"`
}

// secretName is the shape of a secret's name: it is part of its
// placeholder, so it stays short and plain.
var secretName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`) })

// HostPattern is a parsed host of a secret: an exact name, or with Wildcard
// every name under Domain (*.example.com matches a.example.com and
// a.b.example.com, not example.com itself). It is written and matched as
// the domain of an allow rule (sandbox.network.allow).
type HostPattern struct {
	Domain   string // lower case, no trailing dot
	Wildcard bool
}

// ParseHostPattern parses "api.example.com" or "*.example.com" as an allow
// rule's domain is parsed. IP addresses are refused: a secret is bound to
// a name the upstream's certificate must prove.
func ParseHostPattern(s string) (HostPattern, error) {
	if _, err := netip.ParseAddr(strings.Trim(strings.TrimSpace(s), "[]")); err == nil {
		return HostPattern{}, errors.New("is an IP address: bind a secret to a name")
	}
	r, err := parseRule("", 0, AllowRule{Domain: s})
	if ce := (*ConfigError)(nil); errors.As(err, &ce) {
		return HostPattern{}, errors.New(ce.Msg)
	} else if err != nil {
		return HostPattern{}, err
	}
	if !strings.Contains(r.Domain, ".") {
		return HostPattern{}, errors.New("want a domain name such as api.example.com or *.example.com")
	}
	return HostPattern{Domain: r.Domain, Wildcard: r.Wildcard}, nil
}

// Matches reports whether host (any case, optional trailing dot) is p.
func (p HostPattern) Matches(host string) bool {
	return Rule{Domain: p.Domain, Wildcard: p.Wildcard}.MatchesHost(strings.TrimSuffix(strings.ToLower(host), "."))
}

func (p HostPattern) String() string {
	if p.Wildcard {
		return "*." + p.Domain
	}
	return p.Domain
}

// Secret is a parsed sandbox.secrets entry, its value not yet read.
type Secret struct {
	Name     string
	FromEnv  string
	FromFile string
	Hosts    []HostPattern
	Env      string
}

// reservedSecretEnv are the variables the sandbox's CA bundle is named in
// (docs/secrets.md); a placeholder may not take them.
var reservedSecretEnv = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PATH", "HOME"}

// ParseSecrets checks sandbox.secrets and returns its entries sorted by
// name. env is sandbox.docker.env, whose keys a placeholder may not take.
func ParseSecrets(secrets map[string]SecretConfig, env map[string]string) ([]Secret, error) {
	names := make([]string, 0, len(secrets))
	for n := range secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Secret, 0, len(names))
	envOwner := map[string]string{}
	for _, n := range names {
		c := secrets[n]
		field := "sandbox.secrets." + n
		bad := func(sub, value, msg string) error {
			return &ConfigError{Field: field + sub, Value: value, Msg: msg}
		}
		if !secretName().MatchString(n) {
			return nil, bad("", "", "a secret's name must match ^[a-z][a-z0-9_]{0,31}$")
		}
		s := Secret{Name: n, FromEnv: c.FromEnv, FromFile: c.FromFile, Env: c.Env}
		switch {
		case c.FromEnv == "" && c.FromFile == "":
			return nil, bad("", "", "set fromEnv (a variable of the daemon's environment) or fromFile (a file the daemon reads); a secret never comes from a request")
		case c.FromEnv != "" && c.FromFile != "":
			return nil, bad("", "", "set fromEnv or fromFile, not both")
		case c.FromEnv != "":
			if err := envguard.ValidateKey(c.FromEnv); err != nil {
				return nil, bad(".fromEnv", c.FromEnv, err.Error())
			}
		default:
			if !filepath.IsAbs(c.FromFile) {
				return nil, bad(".fromFile", c.FromFile, "must be an absolute path")
			}
		}
		if len(c.Hosts) == 0 {
			return nil, bad(".hosts", "", "a secret must be bound to at least one host; it is sent to those hosts only")
		}
		for i, h := range c.Hosts {
			p, err := ParseHostPattern(h)
			if err != nil {
				return nil, bad(fmt.Sprintf(".hosts[%d]", i), h, err.Error())
			}
			s.Hosts = append(s.Hosts, p)
		}
		if c.Env == "" {
			return nil, bad(".env", "", "name the variable the sandbox sees the placeholder in")
		}
		if err := envguard.ValidateKey(c.Env); err != nil {
			return nil, bad(".env", c.Env, err.Error())
		}
		upper := strings.ToUpper(c.Env)
		if envguard.IsBlockedEverywhere(c.Env) || envguard.IsPinned(upper) {
			return nil, bad(".env", c.Env, "the env guard forbids this variable (it changes how programs run)")
		}
		for _, r := range reservedSecretEnv {
			if upper == r {
				return nil, bad(".env", c.Env, "this variable is set by sandboxctl itself")
			}
		}
		if _, ok := env[c.Env]; ok {
			return nil, bad(".env", c.Env, "sandbox.docker.env sets this variable too")
		}
		if other, ok := envOwner[upper]; ok {
			return nil, bad(".env", c.Env, "secret "+other+" uses this variable too")
		}
		envOwner[upper] = n
		out = append(out, s)
	}
	return out, nil
}

// ErrSecretUnavailable marks a secret whose value the daemon cannot read at
// start (an unset variable, a missing or empty file).
var ErrSecretUnavailable = errors.New("secret unavailable")

// maxSecretBytes bounds a secret's value: it goes into an HTTP header.
const maxSecretBytes = 16 << 10

// minSecretBytes is the shortest value accepted: every occurrence of a
// value is masked in command output, which a short one would garble.
const minSecretBytes = 8

// Value reads s's value from getenv or its file. The value is trimmed of
// surrounding white space (a file's final newline); an empty value, or one
// holding a control character (it could not travel in a header), is an
// ErrSecretUnavailable naming the secret, never the value.
func (s Secret) Value(getenv func(string) string) (string, error) {
	var v string
	field := "sandbox.secrets." + s.Name
	if s.FromEnv != "" {
		v = getenv(s.FromEnv)
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("%s: the daemon's environment has no %s: %w", field, s.FromEnv, ErrSecretUnavailable)
		}
	} else {
		b, err := os.ReadFile(s.FromFile)
		if err != nil {
			return "", fmt.Errorf("%s: %w (%w)", field, ErrSecretUnavailable, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return "", fmt.Errorf("%s: %s is empty: %w", field, s.FromFile, ErrSecretUnavailable)
		}
		v = string(b)
	}
	v = strings.TrimSpace(v)
	if len(v) < minSecretBytes {
		return "", fmt.Errorf("%s: the value is shorter than %d bytes (too short to be masked in output): %w", field, minSecretBytes, ErrSecretUnavailable)
	}
	if len(v) > maxSecretBytes {
		return "", fmt.Errorf("%s: the value is longer than %d bytes: %w", field, maxSecretBytes, ErrSecretUnavailable)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%s: the value holds a control character and cannot be sent in a header: %w", field, ErrSecretUnavailable)
		}
	}
	return v, nil
}

// checkSecretsAllowed refuses secrets the egress policy could never carry:
// the broker is part of the allowlist proxy, so secrets need egress
// allowlist, and each of a secret's hosts must be allowed on port 443 by a
// domain rule (a wildcard host by a wildcard rule covering all of it).
func checkSecretsAllowed(secrets []Secret, n Network) error {
	if n.Egress != EgressAllowlist {
		return &ConfigError{Field: "sandbox.secrets", Msg: "secrets are added by the egress proxy: they need sandbox.network.egress allowlist"}
	}
	for _, s := range secrets {
		for i, h := range s.Hosts {
			if !allowsSecretHost(n.Rules, h) {
				return &ConfigError{Field: fmt.Sprintf("sandbox.secrets.%s.hosts[%d]", s.Name, i), Value: h.String(),
					Msg: "no rule of sandbox.network.allow allows this host on port 443: the secret could never be sent"}
			}
		}
	}
	return nil
}

func allowsSecretHost(rules []Rule, h HostPattern) bool {
	for _, r := range rules {
		if r.Domain == "" || !r.AllowsPort(443) {
			continue
		}
		if !h.Wildcard && r.MatchesHost(h.Domain) {
			return true
		}
		if h.Wildcard && r.Wildcard && (r.Domain == h.Domain || strings.HasSuffix(h.Domain, "."+r.Domain)) {
			return true
		}
	}
	return false
}
