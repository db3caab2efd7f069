package sandboxconfig

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"sync"

	"github.com/docker/go-units"
)

// EngineConfig is one entry of sandbox.engines: a Docker Engine (or an
// Engine-compatible API) sandboxes may be placed on.
type EngineConfig struct {
	// Name identifies the Engine in listings, errors and metrics.
	Name string `yaml:"name" json:"name"`
	// Address is unix:///path/to/docker.sock, tcp://host:port (TLS
	// required) or ssh://[user@]host[:port][/remote/docker.sock] (the ssh
	// client runs `docker system dial-stdio` there); empty is the
	// environment's Engine (DOCKER_HOST, else the local socket).
	Address string `yaml:"address" json:"address,omitempty"`
	// TLS are the client certificate files for a tcp:// Address.
	TLS EngineTLS `yaml:"tls" json:"tls,omitzero"`
	// SSHConfig is an ssh_config file for an ssh:// Address (ssh -F: the
	// key, known hosts, jump hosts); empty uses the daemon user's own.
	SSHConfig string `yaml:"sshConfig" json:"sshConfig,omitempty"`
	// Labels describe the Engine (zone, hardware); informative.
	Labels map[string]string `yaml:"labels" json:"labels,omitempty"`
	// MaxSandboxes caps the sandboxes placed on the Engine (0: no cap).
	MaxSandboxes int `yaml:"maxSandboxes" json:"maxSandboxes,omitempty"`
	// Memory caps the sum of the memory limits of its sandboxes, e.g.
	// "16g" ("": no cap).
	Memory string `yaml:"memory" json:"memory,omitempty"`
}

// EngineTLS names the PEM files of a TLS client: the CA that signed the
// Engine's certificate, and this client's certificate and key.
type EngineTLS struct {
	CA   string `yaml:"ca" json:"ca,omitempty"`
	Cert string `yaml:"cert" json:"cert,omitempty"`
	Key  string `yaml:"key" json:"key,omitempty"`
}

// Engine is a parsed, validated EngineConfig.
type Engine struct {
	Name   string
	Scheme string // "unix", "tcp", "ssh" or "" (the environment's Engine)
	// Address as configured ("" for the environment's Engine).
	Address      string
	TLS          EngineTLS
	SSHConfig    string
	Labels       map[string]string
	MaxSandboxes int
	MemoryBytes  int64 // 0: no cap
}

// LocalEngineName is the name of the default Engine (the one the
// environment names, as before sandbox.engines existed).
const LocalEngineName = "local"

var engineNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`) })

// ParseEngines parses and checks sandbox.engines; none configured is the
// one Engine of the environment, named LocalEngineName.
func ParseEngines(list []EngineConfig) ([]Engine, error) {
	if len(list) == 0 {
		return []Engine{{Name: LocalEngineName}}, nil
	}
	out := make([]Engine, 0, len(list))
	seen := map[string]bool{}
	for i, ec := range list {
		field := fmt.Sprintf("sandbox.engines[%d]", i)
		e, err := parseEngine(field, ec)
		if err != nil {
			return nil, err
		}
		if seen[e.Name] {
			return nil, &ConfigError{Field: field + ".name", Value: e.Name, Msg: "two Engines have this name"}
		}
		seen[e.Name] = true
		out = append(out, e)
	}
	return out, nil
}

func parseEngine(field string, ec EngineConfig) (Engine, error) {
	e := Engine{Name: ec.Name, Address: ec.Address, TLS: ec.TLS, SSHConfig: ec.SSHConfig, Labels: ec.Labels, MaxSandboxes: ec.MaxSandboxes}
	if !engineNameRE().MatchString(ec.Name) {
		return e, &ConfigError{Field: field + ".name", Value: ec.Name, Msg: "must be 1-63 of a-z 0-9 _ . - starting with a letter or digit"}
	}
	field += " (" + ec.Name + ")"
	if ec.MaxSandboxes < 0 {
		return e, &ConfigError{Field: field + ".maxSandboxes", Value: strconv.Itoa(ec.MaxSandboxes), Msg: "must be >= 0 (0: no cap)"}
	}
	if ec.Memory != "" {
		n, err := units.RAMInBytes(ec.Memory)
		if err != nil || n <= 0 {
			return e, &ConfigError{Field: field + ".memory", Value: ec.Memory, Msg: "not a size like 16g"}
		}
		e.MemoryBytes = n
	}
	for k := range ec.Labels {
		if k == "" {
			return e, &ConfigError{Field: field + ".labels", Msg: "a label has an empty key"}
		}
	}
	tlsSet := ec.TLS != (EngineTLS{})
	if ec.Address == "" {
		if tlsSet {
			return e, &ConfigError{Field: field + ".tls", Msg: "needs a tcp:// address"}
		}
		return e, nil
	}
	u, err := url.Parse(ec.Address)
	if err != nil {
		return e, &ConfigError{Field: field + ".address", Value: ec.Address, Msg: "not a URL: " + err.Error()}
	}
	e.Scheme = u.Scheme
	if ec.SSHConfig != "" && u.Scheme != "ssh" {
		return e, &ConfigError{Field: field + ".sshConfig", Msg: "applies to ssh:// addresses only"}
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || u.Path == "" || u.Path[0] != '/' {
			return e, &ConfigError{Field: field + ".address", Value: ec.Address, Msg: "want unix:///absolute/path/to/docker.sock"}
		}
		if tlsSet {
			return e, &ConfigError{Field: field + ".tls", Msg: "TLS applies to tcp:// addresses only"}
		}
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" || (u.Path != "" && u.Path != "/") {
			return e, &ConfigError{Field: field + ".address", Value: ec.Address, Msg: "want tcp://host:port"}
		}
		// The Engine API is root on its host: never without TLS client
		// certificates.
		for _, f := range []struct{ name, path string }{{"ca", ec.TLS.CA}, {"cert", ec.TLS.Cert}, {"key", ec.TLS.Key}} {
			if f.path == "" {
				return e, &ConfigError{Field: field + ".tls." + f.name, Msg: "a tcp:// Engine needs TLS: ca, cert and key files"}
			}
			if _, err := os.Stat(f.path); err != nil {
				return e, &ConfigError{Field: field + ".tls." + f.name, Value: f.path, Msg: "cannot read: " + err.Error()}
			}
		}
	case "ssh":
		if u.Hostname() == "" || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path[0] != '/') {
			return e, &ConfigError{Field: field + ".address", Value: ec.Address, Msg: "want ssh://[user@]host[:port][/remote/docker.sock]"}
		}
		if _, hasPass := u.User.Password(); hasPass {
			return e, &ConfigError{Field: field + ".address", Value: ec.Address, Msg: "ssh:// takes no password: use a key (sshConfig)"}
		}
		if tlsSet {
			return e, &ConfigError{Field: field + ".tls", Msg: "TLS applies to tcp:// addresses only (ssh:// is encrypted by ssh)"}
		}
		if ec.SSHConfig != "" {
			if _, err := os.Stat(ec.SSHConfig); err != nil {
				return e, &ConfigError{Field: field + ".sshConfig", Value: ec.SSHConfig, Msg: "cannot read: " + err.Error()}
			}
		}
	default:
		return e, &ConfigError{Field: field + ".address", Value: ec.Address, Msg: "scheme must be unix://, tcp:// or ssh://"}
	}
	return e, nil
}
