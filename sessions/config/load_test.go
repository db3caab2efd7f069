package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDefaultsAndOverrides(t *testing.T) {
	f, err := Parse("t.yaml", []byte(`
exec:
  host: gateway
  security: full
  backgroundMs: 500
sandbox:
  docker:
    env: {FOO: bar}
    pidsLimit: 64
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Exec.Host != "gateway" || f.Exec.Security != "full" || f.Exec.BackgroundMs != 500 {
		t.Fatalf("exec not applied: %+v", f.Exec)
	}
	if f.Exec.Ask != "on-miss" || f.Exec.TimeoutSec != 1800 || !f.Exec.NotifyOnExit {
		t.Fatalf("defaults lost: %+v", f.Exec)
	}
	if f.Sandbox.Docker.Env["FOO"] != "bar" || f.Sandbox.Docker.Env["LANG"] != "C.UTF-8" {
		t.Fatalf("env = %v, want FOO and the LANG default", f.Sandbox.Docker.Env)
	}
	if f.Sandbox.Docker.PidsLimit != 64 || !f.Sandbox.Docker.ReadOnlyRoot || f.Sandbox.Docker.Network != "none" {
		t.Fatalf("docker = %+v", f.Sandbox.Docker)
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, doc := range []string{"", "\n", "# only a comment\n"} {
		f, err := Parse("e.yaml", []byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if f.Exec.Host != "sandbox" || f.Sandbox.Docker.Image == "" {
			t.Fatalf("%q: not defaults: %+v", doc, f)
		}
	}
}

func TestParseErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct {
		name, doc string
		key       string
		line      int
		msg       string
	}{
		{"unknown top key", "exec: {}\nbogus: 1\n", "bogus", 2, "unknown key"},
		{"unknown nested key", "exec:\n  host: sandbox\n  hots: x\n", "exec.hots", 3, "unknown key"},
		{"case slip", "exec:\n  Host: gateway\n", "exec.Host", 2, `did you mean "host"`},
		{"bad enum", "exec:\n  security: loose\n", "exec.security", 2, `"loose" is not one of deny, allowlist, full`},
		{"bad ask", "\n\nexec:\n  ask: sometimes\n", "exec.ask", 4, "is not one of off, on-miss, always"},
		{"bad int", "exec:\n  timeoutSec: soon\n", "exec.timeoutSec", 2, "want a whole number"},
		{"negative", "exec:\n  backgroundMs: -5\n", "exec.backgroundMs", 2, "must be >= 0"},
		{"bool", "sandbox:\n  docker:\n    readOnlyRoot: maybe\n", "sandbox.docker.readOnlyRoot", 3, "boolean"},
		{"list wanted", "exec:\n  safeBins: head\n", "exec.safeBins", 2, "want a list"},
		{"safe bin path", "exec:\n  safeBins: [/usr/bin/head]\n", "exec.safeBins[0]", 2, "bare program name"},
		{"network host", "sandbox:\n  docker:\n    network: host\n", "sandbox.docker.network", 3, "network host"},
		{"container net", "sandbox:\n  docker:\n    network: \"container:abc\"\n", "sandbox.docker.network", 3, "another container"},
		{"seccomp unconfined", "sandbox:\n  docker:\n    seccompProfile: unconfined\n", "sandbox.docker.seccompProfile", 3, "unconfined"},
		{"docker sock bind", "sandbox:\n  docker:\n    binds:\n      - /var/run/docker.sock:/var/run/docker.sock\n", "sandbox.docker.binds[0]", 4, "docker.sock"},
		{"etc bind", "sandbox:\n  docker:\n    binds: [\"/etc:/host-etc:ro\"]\n", "sandbox.docker.binds[0]", 3, "/etc"},
		{"credential env", "sandbox:\n  docker:\n    env:\n      OPENAI_API_KEY: x\n", "sandbox.docker.env.OPENAI_API_KEY", 4, "OPENAI_API_KEY"},
		{"duplicate", "exec:\n  host: sandbox\n  host: gateway\n", "exec.host", 3, ""},
		{"bad scope", "sandbox:\n  scope: planet\n", "sandbox.scope", 2, "session, agent, shared"},
		{"memory", "sandbox:\n  docker:\n    memory: lots\n", "sandbox.docker.memory", 3, "not a size"},
		{"zero quota", "limits:\n  approvals:\n    pending: 0\n", "limits.approvals.pending", 3, "positive whole number"},
		{"per agent over global", "limits:\n  sessions:\n    runningPerAgent: 9\n    running: 4\n", "limits.sessions.runningPerAgent", 3, "over limits.sessions.running (4)"},
		{"negative sandbox cap", "sandbox:\n  maxPerAgent: -1\n", "sandbox.maxPerAgent", 2, "must be >= 0"},
		{"sandbox per agent over max", "sandbox:\n  maxPerAgent: 5\n  max: 2\n", "sandbox.maxPerAgent", 2, "over sandbox.max (2)"},
		{"workspace quota size", "sandbox:\n  workspaceQuota: 1k\n", "sandbox.workspaceQuota", 2, "at least 16m"},
		{"secret unbound", "sandbox:\n  secrets:\n    gh: {fromEnv: GH, env: GITHUB_TOKEN}\n", "sandbox.secrets.gh.hosts", 3, "bound to at least one host"},
		{"secret no source", "sandbox:\n  secrets:\n    gh: {hosts: [api.github.com], env: GITHUB_TOKEN}\n", "sandbox.secrets.gh", 3, "never comes from a request"},
		{"secret two sources", "sandbox:\n  secrets:\n    gh: {fromEnv: GH, fromFile: /run/gh, hosts: [api.github.com], env: GITHUB_TOKEN}\n", "sandbox.secrets.gh", 3, "not both"},
		{"secret relative file", "sandbox:\n  secrets:\n    gh: {fromFile: gh.txt, hosts: [api.github.com], env: GITHUB_TOKEN}\n", "sandbox.secrets.gh.fromFile", 3, "absolute path"},
		{"secret ip host", "sandbox:\n  secrets:\n    gh: {fromEnv: GH, hosts: [10.0.0.1], env: GITHUB_TOKEN}\n", "sandbox.secrets.gh.hosts[0]", 3, "bind a secret to a name"},
		{"secret bad wildcard", "sandbox:\n  secrets:\n    gh: {fromEnv: GH, hosts: [\"api.*.com\"], env: GITHUB_TOKEN}\n", "sandbox.secrets.gh.hosts[0]", 3, "whole first label"},
		{"secret guarded env", "sandbox:\n  secrets:\n    gh: {fromEnv: GH, hosts: [api.github.com], env: LD_PRELOAD}\n", "sandbox.secrets.gh.env", 3, "env guard forbids"},
		{"secret ca env", "sandbox:\n  secrets:\n    gh: {fromEnv: GH, hosts: [api.github.com], env: SSL_CERT_FILE}\n", "sandbox.secrets.gh.env", 3, "set by sandboxctl"},
		{"secret env twice", "sandbox:\n  secrets:\n    a: {fromEnv: A, hosts: [a.example.com], env: TOKEN}\n    b: {fromEnv: B, hosts: [b.example.com], env: TOKEN}\n", "sandbox.secrets.b.env", 4, "secret a uses this variable"},
		{"secret docker env", "sandbox:\n  docker:\n    env: {TOKEN_NAME: x}\n  secrets:\n    a: {fromEnv: A, hosts: [a.example.com], env: TOKEN_NAME}\n", "sandbox.secrets.a.env", 0, "sandbox.docker.env sets"},
		{"secret bad name", "sandbox:\n  secrets:\n    GitHub: {fromEnv: A, hosts: [a.example.com], env: GH}\n", "sandbox.secrets.GitHub", 3, "must match"},
		{"secret without allowlist", "sandbox:\n  secrets:\n    a: {fromEnv: A, hosts: [a.example.com], env: TOKEN}\n", "sandbox.secrets", 2, "need sandbox.network.egress allowlist"},
		{"secret host not allowed", "sandbox:\n  network:\n    egress: allowlist\n    allow: [{domain: b.example.com}, {domain: \"*.example.org\", ports: [80]}]\n  secrets:\n    a: {fromEnv: A, hosts: [a.example.com], env: TOKEN}\n", "sandbox.secrets.a.hosts[0]", 0, "no rule of sandbox.network.allow"},
		{"secret wildcard wider than rule", "sandbox:\n  network:\n    egress: allowlist\n    allow: [{domain: \"*.a.example.com\"}]\n  secrets:\n    a: {fromEnv: A, hosts: [\"*.example.com\"], env: TOKEN}\n", "sandbox.secrets.a.hosts[0]", 0, "no rule of sandbox.network.allow"},
		{"secrets ca relative", "sandbox:\n  secretsUpstreamCAFile: ca.pem\n", "sandbox.secretsUpstreamCAFile", 2, "absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				// yaml's own duplicate-key error is still a config *Error.
				t.Fatalf("not ErrInvalid: %v", err)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("not *Error: %v", err)
			}
			if tt.key != "" && ce.Key != tt.key && tt.name != "duplicate" {
				t.Errorf("key = %q, want %q (%v)", ce.Key, tt.key, err)
			}
			if tt.line != 0 && ce.Line != tt.line && tt.name != "duplicate" {
				t.Errorf("line = %d, want %d (%v)", ce.Line, tt.line, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

func TestParseMalformedYAML(t *testing.T) {
	_, err := Parse("m.yaml", []byte("exec:\n  host: [unterminated\n"))
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "malformed YAML") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sandboxctl.yaml")
	if err := os.WriteFile(p, []byte("exec:\n  host: gateway\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil || f.Exec.Host != "gateway" {
		t.Fatalf("Load = %+v, %v", f.Exec, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want func(Exec) bool
		err  string
	}{
		{"sandboxctl names", map[string]string{"SANDBOXCTL_YIELD_MS": "250", "SANDBOXCTL_JOB_TTL_MS": "60000"},
			func(e Exec) bool { return e.BackgroundMs == 250 && e.CleanupMs == 60000 }, ""},
		{"pi aliases", map[string]string{"PI_BASH_MAX_OUTPUT_CHARS": "5000", "PI_BASH_PENDING_MAX_OUTPUT_CHARS": "7000"},
			func(e Exec) bool { return e.MaxOutputChars == 5000 && e.PendingMaxOutputChars == 7000 }, ""},
		{"sandboxctl wins", map[string]string{"SANDBOXCTL_YIELD_MS": "11", "PI_BASH_YIELD_MS": "22"},
			func(e Exec) bool { return e.BackgroundMs == 11 }, ""},
		{"garbage", map[string]string{"SANDBOXCTL_YIELD_MS": "soon"}, nil, "SANDBOXCTL_YIELD_MS"},
		{"negative", map[string]string{"PI_BASH_JOB_TTL_MS": "-1"}, nil, "PI_BASH_JOB_TTL_MS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Default()
			err := f.ApplyEnv(func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want mention of %s", err, tt.err)
				}
				if f.Exec.BackgroundMs != Default().Exec.BackgroundMs {
					t.Fatal("bad override changed the config")
				}
				return
			}
			if err != nil || !tt.want(f.Exec) {
				t.Fatalf("err=%v exec=%+v", err, f.Exec)
			}
		})
	}
}
