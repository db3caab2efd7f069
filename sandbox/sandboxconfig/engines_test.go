package sandboxconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEnginesDefaultIsTheLocalEngine(t *testing.T) {
	got, err := ParseEngines(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != LocalEngineName || got[0].Address != "" {
		t.Fatalf("default engines = %+v, want the one environment Engine named %q", got, LocalEngineName)
	}
}

func TestParseEngines(t *testing.T) {
	dir := t.TempDir()
	pem := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tlsOK := EngineTLS{CA: pem("ca.pem"), Cert: pem("cert.pem"), Key: pem("key.pem")}
	good := []EngineConfig{
		{Name: "a", Address: "unix:///run/a.sock", MaxSandboxes: 10, Memory: "8g", Labels: map[string]string{"zone": "x"}},
		{Name: "b", Address: "tcp://127.0.0.1:2376", TLS: tlsOK},
		{Name: "c", Address: "ssh://deploy@rack3:2222/run/docker.sock", SSHConfig: pem("ssh_config")},
		{Name: "d", Address: "ssh://rack4"},
	}
	got, err := ParseEngines(good)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Scheme != "unix" || got[0].MemoryBytes != 8<<30 || got[0].MaxSandboxes != 10 || got[1].Scheme != "tcp" ||
		got[2].Scheme != "ssh" || got[2].SSHConfig == "" || got[3].Scheme != "ssh" {
		t.Fatalf("parsed = %+v", got)
	}
	for _, tc := range []struct {
		name string
		in   []EngineConfig
		want string
	}{
		{"bad name", []EngineConfig{{Name: "A B"}}, "sandbox.engines[0].name"},
		{"duplicate", []EngineConfig{{Name: "a"}, {Name: "a", Address: "unix:///x"}}, "two Engines have this name"},
		{"tcp without tls", []EngineConfig{{Name: "a", Address: "tcp://10.0.0.1:2375"}}, "needs TLS"},
		{"tcp missing file", []EngineConfig{{Name: "a", Address: "tcp://10.0.0.1:2376", TLS: EngineTLS{CA: tlsOK.CA, Cert: tlsOK.Cert, Key: filepath.Join(dir, "nope")}}}, "tls.key"},
		{"tcp no port", []EngineConfig{{Name: "a", Address: "tcp://10.0.0.1", TLS: tlsOK}}, "want tcp://host:port"},
		{"unix relative", []EngineConfig{{Name: "a", Address: "unix://run/a.sock"}}, "want unix:///absolute"},
		{"unix with tls", []EngineConfig{{Name: "a", Address: "unix:///a.sock", TLS: tlsOK}}, "tcp:// addresses only"},
		{"ssh without host", []EngineConfig{{Name: "a", Address: "ssh:///run/docker.sock"}}, "want ssh://[user@]host"},
		{"ssh with password", []EngineConfig{{Name: "a", Address: "ssh://me:secret@host"}}, "no password"},
		{"ssh with query", []EngineConfig{{Name: "a", Address: "ssh://host?x=1"}}, "want ssh://"},
		{"ssh with tls", []EngineConfig{{Name: "a", Address: "ssh://host", TLS: tlsOK}}, "tcp:// addresses only"},
		{"ssh config missing", []EngineConfig{{Name: "a", Address: "ssh://host", SSHConfig: filepath.Join(dir, "nope")}}, "sshConfig"},
		{"ssh config on unix", []EngineConfig{{Name: "a", Address: "unix:///a.sock", SSHConfig: pem("c2")}}, "ssh:// addresses only"},
		{"http", []EngineConfig{{Name: "a", Address: "http://host:1"}}, "scheme must be"},
		{"negative cap", []EngineConfig{{Name: "a", MaxSandboxes: -1}}, "maxSandboxes"},
		{"bad memory", []EngineConfig{{Name: "a", Memory: "lots"}}, "memory"},
	} {
		_, err := ParseEngines(tc.in)
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want an ErrInvalidConfig containing %q", tc.name, err, tc.want)
		}
	}
	c := DefaultConfig()
	c.Engines = []EngineConfig{{Name: "a", Address: "ftp://x"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sandbox.engines[0]") {
		t.Fatalf("Validate with a bad engine = %v, want the engine named", err)
	}
}
