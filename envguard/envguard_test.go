package envguard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/vocab"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"HOME", true},
		{"_", true},
		{"_JAVA_OPTIONS", true},
		{"a1_B2", true},
		{"x", true},
		{"", false},
		{"1ABC", false},
		{"9", false},
		{"A-B", false},
		{"A=B", false},
		{"A B", false},
		{" A", false},
		{"A\n", false},
		{"A\x00", false},
		{"ÄPFEL", false},
		{"KEY\u00e9", false},
		{"ＡＢＣ", false}, // full-width letters
		{"A.B", false},
		{"A(B)", false},
		{"=C:", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.key), func(t *testing.T) {
			err := ValidateKey(tt.key)
			if got := err == nil; got != tt.want {
				t.Fatalf("ValidateKey(%q) = %v, want valid=%v", tt.key, err, tt.want)
			}
			if err == nil {
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Rule != RuleInvalidKey || re.Key != tt.key {
				t.Fatalf("ValidateKey(%q) = %#v, want *RefusedError{Rule: RuleInvalidKey}", tt.key, err)
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("errors.Is(%v, ErrRefused) = false", err)
			}
			if !strings.Contains(err.Error(), "invalid key") {
				t.Fatalf("message %q does not name the rule", err.Error())
			}
		})
	}
}

// TestCheckKeyClasses samples every list, every prefix and the pattern on
// each host.
func TestCheckKeyClasses(t *testing.T) {
	tests := []struct {
		key       string
		wantRule  Rule   // on gateway and node; "" = accepted
		wantMatch string // RefusedError.Match
	}{
		// blocked everywhere, one per group plus the named keys of SECURITY.md
		{"NODE_OPTIONS", RuleBlocked, ""},
		{"NODE_PATH", RuleBlocked, ""},
		{"NODE_REPL_EXTERNAL_MODULE", RuleBlocked, ""},
		{"PYTHONHOME", RuleBlocked, ""},
		{"PYTHONPATH", RuleBlocked, ""},
		{"PYTHONSTARTUP", RuleBlocked, ""},
		{"PYTHONBREAKPOINT", RuleBlocked, ""},
		{"PERL5LIB", RuleBlocked, ""},
		{"PERL5OPT", RuleBlocked, ""},
		{"RUBYLIB", RuleBlocked, ""},
		{"RUBYOPT", RuleBlocked, ""},
		{"BASH_ENV", RuleBlocked, ""},
		{"ENV", RuleBlocked, ""},
		{"KSH_ENV", RuleBlocked, ""},
		{"SHELL", RuleBlocked, ""},
		{"SHELLOPTS", RuleBlocked, ""},
		{"BASHOPTS", RuleBlocked, ""},
		{"PS4", RuleBlocked, ""},
		{"IFS", RuleBlocked, ""},
		{"FPATH", RuleBlocked, ""},
		{"GCONV_PATH", RuleBlocked, ""},
		{"GLIBC_TUNABLES", RuleBlocked, ""},
		{"JAVA_TOOL_OPTIONS", RuleBlocked, ""},
		{"_JAVA_OPTIONS", RuleBlocked, ""},
		{"JDK_JAVA_OPTIONS", RuleBlocked, ""},
		{"JAVA_OPTS", RuleBlocked, ""},
		{"MAVEN_OPTS", RuleBlocked, ""},
		{"DOTNET_STARTUP_HOOKS", RuleBlocked, ""},
		{"CORECLR_PROFILER", RuleBlocked, ""},
		{"GIT_EXEC_PATH", RuleBlocked, ""},
		{"GIT_DIR", RuleBlocked, ""},
		{"GIT_WORK_TREE", RuleBlocked, ""},
		{"GIT_EXTERNAL_DIFF", RuleBlocked, ""},
		{"GIT_EDITOR", RuleBlocked, ""},
		{"GIT_SEQUENCE_EDITOR", RuleBlocked, ""},
		{"GIT_TEMPLATE_DIR", RuleBlocked, ""},
		{"GIT_SSL_NO_VERIFY", RuleBlocked, ""},
		{"GIT_HOOK_PATH", RuleBlocked, ""},
		{"HGRCPATH", RuleBlocked, ""},
		{"SVN_SSH", RuleBlocked, ""},
		{"CC", RuleBlocked, ""},
		{"CXX", RuleBlocked, ""},
		{"RUSTC", RuleBlocked, ""},
		{"RUSTC_WRAPPER", RuleBlocked, ""},
		{"CARGO_BUILD_RUSTC_WRAPPER", RuleBlocked, ""},
		{"CMAKE_TOOLCHAIN_FILE", RuleBlocked, ""},
		{"MAKEFLAGS", RuleBlocked, ""},
		{"CONFIG_SHELL", RuleBlocked, ""},
		{"BROWSER", RuleBlocked, ""},
		{"VIMINIT", RuleBlocked, ""},
		{"SUDO_ASKPASS", RuleBlocked, ""},
		{"HELM_PLUGINS", RuleBlocked, ""},
		{"SSLKEYLOGFILE", RuleBlocked, ""},
		{"LUA_INIT", RuleBlocked, ""},
		{"LUA_INIT_5_4", RuleBlocked, ""},
		{"ERL_AFLAGS", RuleBlocked, ""},
		{"R_PROFILE_USER", RuleBlocked, ""},
		{"TCLLIBPATH", RuleBlocked, ""},
		{"HOSTALIASES", RuleBlocked, ""},
		// blocked-everywhere prefixes
		{"LD_PRELOAD", RuleBlockedPrefix, "LD_"},
		{"LD_LIBRARY_PATH", RuleBlockedPrefix, "LD_"},
		{"LD_AUDIT", RuleBlockedPrefix, "LD_"},
		{"DYLD_INSERT_LIBRARIES", RuleBlockedPrefix, "DYLD_"},
		{"BASH_FUNC_x", RuleBlockedPrefix, "BASH_FUNC_"},
		// override-only keys, one per group plus the named keys of SECURITY.md
		{"HOME", RuleOverrideOnly, ""},
		{"ZDOTDIR", RuleBlocked, ""},
		{"GIT_SSH_COMMAND", RuleBlocked, ""},
		{"GIT_SSH", RuleBlocked, ""},
		{"GIT_ASKPASS", RuleBlocked, ""},
		{"SSH_ASKPASS", RuleBlocked, ""},
		{"PAGER", RuleBlocked, ""},
		{"EDITOR", RuleBlocked, ""},
		{"VISUAL", RuleBlocked, ""},
		{"LESSOPEN", RuleBlocked, ""},
		{"PROMPT_COMMAND", RuleBlocked, ""},
		{"OPENSSL_CONF", RuleBlocked, ""},
		{"CLASSPATH", RuleBlocked, ""},
		{"HTTP_PROXY", RuleOverrideOnly, ""},
		{"https_proxy", RuleOverrideOnly, ""},
		{"NO_PROXY", RuleOverrideOnly, ""},
		{"SSL_CERT_FILE", RuleOverrideOnly, ""},
		{"REQUESTS_CA_BUNDLE", RuleOverrideOnly, ""},
		{"NODE_EXTRA_CA_CERTS", RuleOverrideOnly, ""},
		{"DOCKER_HOST", RuleOverrideOnly, ""},
		{"DOCKER_CONTEXT", RuleOverrideOnly, ""},
		{"PIP_INDEX_URL", RuleOverrideOnly, ""},
		{"UV_INDEX_URL", RuleOverrideOnly, ""},
		{"GOFLAGS", RuleBlocked, ""},
		{"GOPROXY", RuleOverrideOnly, ""},
		{"LDFLAGS", RuleBlocked, ""},
		{"XDG_CONFIG_HOME", RuleOverrideOnly, ""},
		{"AWS_SECRET_ACCESS_KEY", RuleOverrideOnly, ""},
		{"AWS_SHARED_CREDENTIALS_FILE", RuleOverrideOnly, ""},
		{"GOOGLE_APPLICATION_CREDENTIALS", RuleOverrideOnly, ""},
		{"KUBECONFIG", RuleOverrideOnly, ""},
		{"GH_TOKEN", RuleOverrideOnly, ""},
		{"SSH_AUTH_SOCK", RuleOverrideOnly, ""},
		{"ANSIBLE_CONFIG", RuleOverrideOnly, ""},
		{"SYSTEMROOT", RuleOverrideOnly, ""},
		// override-only prefixes and the cargo pattern
		{"GIT_CONFIG_COUNT", RuleBlockedPrefix, "GIT_CONFIG"},
		{"GIT_CONFIG_KEY_0", RuleBlockedPrefix, "GIT_CONFIG"},
		{"GIT_CONFIG_PARAMETERS", RuleBlockedPrefix, "GIT_CONFIG"},
		{"GIT_CONFIG", RuleBlocked, ""},
		{"GIT_TRACE", RuleBlockedPrefix, "GIT_TRACE"},
		{"GIT_TRACE2_EVENT", RuleBlockedPrefix, "GIT_TRACE"},
		{"NPM_CONFIG_REGISTRY", RuleBlockedPrefix, "NPM_CONFIG_"},
		{"npm_config_script_shell", RuleBlockedPrefix, "NPM_CONFIG_"},
		// issue 12 item 6: found accepted by the red team
		{"LESS", RuleBlocked, ""},
		{"PERLLIB", RuleBlocked, ""},
		{"TAR_OPTIONS", RuleBlocked, ""},
		{"MANOPT", RuleBlocked, ""},
		{"LESSKEYIN", RuleBlocked, ""},
		{"LOCPATH", RuleBlocked, ""},
		{"NLSPATH", RuleBlocked, ""},
		{"TERMINFO", RuleBlocked, ""},
		{"LESSSECURE", RuleBlocked, ""},
		{"MANPAGER", RuleBlocked, ""},
		{"PYTHONWARNINGS", RuleBlocked, ""},
		// named as a command
		{"FZF_DEFAULT_COMMAND", RuleBlockedSuffix, "_COMMAND"},
		{"SYSTEMD_PAGER", RuleBlocked, ""},
		{"PSQL_PAGER", RuleBlockedSuffix, "_PAGER"},
		{"SYSTEMD_EDITOR", RuleBlockedSuffix, "_EDITOR"},
		{"rsync_rsh", RuleBlocked, ""},
		{"FOO_RSH", RuleBlockedSuffix, "_RSH"},
		{"CARGO_REGISTRIES_X_INDEX", RuleOverrideOnlyPrefix, "CARGO_REGISTRIES_"},
		{"TF_VAR_region", RuleOverrideOnlyPrefix, "TF_VAR_"},
		{"XDG_SESSION_TYPE", RuleOverrideOnlyPrefix, "XDG_"},
		{"ANSIBLE_BECOME_EXE", RuleOverrideOnlyPrefix, "ANSIBLE_"},
		{"CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", RuleBlockedPrefix, cargoTargetPattern},
		{"CARGO_TARGET_AARCH64_APPLE_DARWIN_RUNNER", RuleBlockedPrefix, cargoTargetPattern},
		{"cargo_target_wasm32_unknown_unknown_runner", RuleBlockedPrefix, cargoTargetPattern},
		// PATH
		{"PATH", RulePathOverride, ""},
		{"Path", RulePathOverride, ""},
		{"path", RulePathOverride, ""},
		// case is ignored for the lists
		{"ld_preload", RuleBlockedPrefix, "LD_"},
		{"Node_Options", RuleBlocked, ""},
		// accepted
		{"MY_VAR", "", ""},
		{"TERM", "", ""},
		{"LANG", "", ""},
		{"LC_ALL", "", ""},
		{"CI", "", ""},
		{"CARGO_TARGET_DIR", "", ""},
		{"CARGO_TARGET_X86_64_LINKER_FLAGS", RuleBlockedSuffix, "FLAGS"},
		{"PATHS", "", ""},
		{"MYPATH", "", ""},
		{"LD", "", ""},
		{"OLD_PWD", "", ""},
		{"GIT_AUTHOR_NAME", "", ""},
		{"NODE_ENV", "", ""},
		{"OPENAI_API_KEY", "", ""}, // credentials in requests are the caller's business
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			for _, host := range []vocab.Host{vocab.HostGateway, vocab.HostNode, vocab.Host(""), vocab.Host("bogus")} {
				err := CheckKey(host, tt.key)
				if tt.wantRule == "" {
					if err != nil {
						t.Fatalf("CheckKey(%s, %s) = %v, want nil", host, tt.key, err)
					}
					continue
				}
				var re *RefusedError
				if !errors.As(err, &re) {
					t.Fatalf("CheckKey(%s, %s) = %v, want *RefusedError", host, tt.key, err)
				}
				if re.Rule != tt.wantRule || re.Match != tt.wantMatch || re.Key != tt.key {
					t.Fatalf("CheckKey(%s, %s) = %+v, want rule %s match %q", host, tt.key, re, tt.wantRule, tt.wantMatch)
				}
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("errors.Is(ErrRefused) false for %v", err)
				}
				if !strings.Contains(err.Error(), tt.key) || re.Detail == "" {
					t.Fatalf("message %q does not name the key or lacks a reason", err.Error())
				}
			}
			// The sandbox only checks validity.
			if err := CheckKey(vocab.HostSandbox, tt.key); err != nil {
				t.Fatalf("CheckKey(sandbox, %s) = %v, want nil", tt.key, err)
			}
		})
	}
}

func TestRefusedErrorMessage(t *testing.T) {
	tests := []struct {
		host vocab.Host
		key  string
		want string
	}{
		{vocab.HostGateway, "LD_PRELOAD", "env LD_PRELOAD refused: blocked everywhere (prefix LD_): loader and interpreter hooks can run code"},
		{vocab.HostNode, "NODE_OPTIONS", "env NODE_OPTIONS refused: blocked everywhere: loader and interpreter hooks can run code"},
		{vocab.HostGateway, "HOME", "env HOME refused: may not be set by a request on this host: it points tools at other configuration or code"},
		{vocab.HostGateway, "GIT_CONFIG_COUNT", "env GIT_CONFIG_COUNT refused: blocked everywhere (prefix GIT_CONFIG): git configuration from the environment can run commands"},
		{vocab.HostGateway, "CARGO_TARGET_X_RUNNER", "env CARGO_TARGET_X_RUNNER refused: blocked everywhere (pattern CARGO_TARGET_<triple>_(LINKER|RUNNER)): cargo runs the linker or runner it names"},
		{vocab.HostGateway, "FZF_DEFAULT_COMMAND", "env FZF_DEFAULT_COMMAND refused: blocked everywhere (suffix _COMMAND): its name says it holds a command that a tool runs"},
		{vocab.HostNode, "PATH", "env PATH refused: PATH may not be set by a request on this host: the host builds PATH from the login shell PATH and pathPrepend"},
		{vocab.HostSandbox, "A-B", `env "A-B" refused: invalid key: must match ^[A-Za-z_][A-Za-z0-9_]*$`},
		{vocab.HostSandbox, "", `env "" refused: invalid key: empty key; must match ^[A-Za-z_][A-Za-z0-9_]*$`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := CheckKey(tt.host, tt.key)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("CheckKey(%s, %q) = %v\nwant %s", tt.host, tt.key, err, tt.want)
			}
		})
	}
	cred := CheckSandboxConfigEnv(map[string]string{"OPENAI_API_KEY": "x"})
	if cred == nil || !strings.HasPrefix(cred.Error(), "env OPENAI_API_KEY refused: looks like a credential (suffix _API_KEY): ") {
		t.Fatalf("credential message = %v", cred)
	}
}

func TestCheckRequest(t *testing.T) {
	tests := []struct {
		name string
		host vocab.Host
		env  map[string]string
		want []string // refused keys, in order; nil = accepted
		rule Rule     // rule of the first refusal
	}{
		{"nil env", vocab.HostGateway, nil, nil, ""},
		{"empty env", vocab.HostNode, map[string]string{}, nil, ""},
		{"plain keys gateway", vocab.HostGateway, map[string]string{"FOO": "1", "BAR_2": "x"}, nil, ""},
		{"LD_PRELOAD gateway", vocab.HostGateway, map[string]string{"LD_PRELOAD": "/tmp/malware.so"}, []string{"LD_PRELOAD"}, RuleBlockedPrefix},
		{"LD_PRELOAD node", vocab.HostNode, map[string]string{"LD_PRELOAD": "/tmp/malware.so"}, []string{"LD_PRELOAD"}, RuleBlockedPrefix},
		{"LD_PRELOAD sandbox", vocab.HostSandbox, map[string]string{"LD_PRELOAD": "/tmp/malware.so"}, nil, ""},
		{"GIT_SSH_COMMAND gateway", vocab.HostGateway, map[string]string{"GIT_SSH_COMMAND": "evil.sh"}, []string{"GIT_SSH_COMMAND"}, RuleBlocked},
		{"GIT_SSH_COMMAND sandbox", vocab.HostSandbox, map[string]string{"GIT_SSH_COMMAND": "evil.sh"}, nil, ""},
		{"PATH gateway", vocab.HostGateway, map[string]string{"PATH": "/tmp/evil"}, []string{"PATH"}, RulePathOverride},
		{"PATH node", vocab.HostNode, map[string]string{"PATH": "/tmp/evil"}, []string{"PATH"}, RulePathOverride},
		{"PATH sandbox", vocab.HostSandbox, map[string]string{"PATH": "/opt/bin:/usr/bin"}, nil, ""},
		{"PATH unknown host fails closed", vocab.Host("elsewhere"), map[string]string{"PATH": "/x"}, []string{"PATH"}, RulePathOverride},
		{"invalid key sandbox", vocab.HostSandbox, map[string]string{"A-B": "1"}, []string{"A-B"}, RuleInvalidKey},
		{"invalid key gateway", vocab.HostGateway, map[string]string{"1X": "1"}, []string{"1X"}, RuleInvalidKey},
		{"NUL value sandbox", vocab.HostSandbox, map[string]string{"X": "a\x00b"}, []string{"X"}, RuleInvalidValue},
		{"NUL value gateway", vocab.HostGateway, map[string]string{"X": "a\x00b"}, []string{"X"}, RuleInvalidValue},
		{
			"several in sorted order", vocab.HostGateway,
			map[string]string{"ZZZ": "ok", "PATH": "/x", "HOME": "/tmp", "BASH_FUNC_ls%%": "() { id; }", "GOOD": "1", "A=B": "c"},
			[]string{"A=B", "BASH_FUNC_ls%%", "HOME", "PATH"}, RuleInvalidKey,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRequest(tt.host, tt.env)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckRequest = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckRequest = %v, want ErrRefused", err)
			}
			var first *RefusedError
			if !errors.As(err, &first) || first.Rule != tt.rule {
				t.Fatalf("first refusal = %+v, want rule %s", first, tt.rule)
			}
			if got := refusedKeys(err); !slices.Equal(got, tt.want) {
				t.Fatalf("refused keys = %q, want %q", got, tt.want)
			}
			if len(tt.want) == 1 {
				if _, ok := err.(*RefusedError); !ok {
					t.Fatalf("single refusal is %T, want *RefusedError", err)
				}
			}
		})
	}
}

// TestCheckRequestDeterministic runs the same map many times: map iteration
// order must not leak into the result.
func TestCheckRequestDeterministic(t *testing.T) {
	env := map[string]string{}
	for i := range 30 {
		env[fmt.Sprintf("LD_X%02d", i)] = "v"
	}
	want := CheckRequest(vocab.HostGateway, env).Error()
	for range 20 {
		if got := CheckRequest(vocab.HostGateway, env).Error(); got != want {
			t.Fatalf("non-deterministic:\n%s\n---\n%s", got, want)
		}
	}
}

func refusedKeys(err error) []string {
	var keys []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			keys = append(keys, refusedKeys(e)...)
		}
		return keys
	}
	var re *RefusedError
	if errors.As(err, &re) {
		keys = append(keys, re.Key)
	}
	return keys
}

func TestLooksLikeCredential(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"OPENAI_API_KEY", true},
		{"openai_api_key", true},
		{"GITHUB_TOKEN", true},
		{"Slack_Token", true},
		{"DB_PASSWORD", true},
		{"SSH_PRIVATE_KEY", true},
		{"CLIENT_SECRET", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"DJANGO_SECRET_KEY", true},
		{"API_KEY", true},
		{"TOKEN", true},
		{"PASSWORD", true},
		{"SECRET", true},
		{"PRIVATE_KEY", true},
		{"AWS_WEB_IDENTITY_TOKEN_FILE", false},
		{"TOKENIZERS_PARALLELISM", false},
		{"PASSWORD_FILE", false},
		{"SECRETARY", false},
		{"MYTOKEN", false},
		{"LANG", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := LooksLikeCredential(tt.key); got != tt.want {
				t.Fatalf("LooksLikeCredential(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

func TestCheckSandboxConfigEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
		rule Rule
	}{
		{"nil", nil, nil, ""},
		{"plain", map[string]string{"LANG": "C.UTF-8", "PIP_NO_CACHE_DIR": "1", "LD_PRELOAD": "allowed here"}, nil, ""},
		{"api key", map[string]string{"OPENAI_API_KEY": "sk-x", "LANG": "C"}, []string{"OPENAI_API_KEY"}, RuleCredential},
		{"token", map[string]string{"GITHUB_TOKEN": "ghp"}, []string{"GITHUB_TOKEN"}, RuleCredential},
		{"invalid", map[string]string{"BAD-KEY": "1"}, []string{"BAD-KEY"}, RuleInvalidKey},
		{"nul", map[string]string{"X": "\x00"}, []string{"X"}, RuleInvalidValue},
		{"several", map[string]string{"Z_SECRET": "1", "A B": "2", "M_PASSWORD": "3"}, []string{"A B", "M_PASSWORD", "Z_SECRET"}, RuleInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSandboxConfigEnv(tt.env)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var first *RefusedError
			if !errors.Is(err, ErrRefused) || !errors.As(err, &first) || first.Rule != tt.rule {
				t.Fatalf("got %v (first %+v), want rule %s", err, first, tt.rule)
			}
			if got := refusedKeys(err); !slices.Equal(got, tt.want) {
				t.Fatalf("refused keys = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestListsConsistent guards the data: upper-case, valid keys, no key both
// blocked everywhere and override-only, and every key reported with a reason.
func TestListsConsistent(t *testing.T) {
	for _, g := range append(slices.Clone(blockedEverywhereGroups), overrideOnlyGroups...) {
		if g.reason == "" {
			t.Errorf("group without reason: %v", g.keys)
		}
		for _, k := range g.keys {
			if k != strings.ToUpper(k) || !validKey(k) {
				t.Errorf("list key %q is not an upper-case valid key", k)
			}
		}
	}
	for k := range overrideOnly() {
		if _, dup := blockedEverywhere()[k]; dup {
			t.Errorf("%s is both blocked everywhere and override-only", k)
		}
	}
	for k := range blockedEverywhere() {
		if err := CheckKey(vocab.HostGateway, k); err == nil {
			t.Errorf("blocked key %s accepted", k)
		}
		if !IsBlockedEverywhere(k) {
			t.Errorf("IsBlockedEverywhere(%s) = false", k)
		}
	}
	for k := range overrideOnly() {
		var re *RefusedError
		if err := CheckKey(vocab.HostNode, k); !errors.As(err, &re) || re.Rule != RuleOverrideOnly {
			t.Errorf("override-only key %s: %v", k, err)
		}
		if IsBlockedEverywhere(k) {
			t.Errorf("override-only key %s is dropped from inherited env", k)
		}
	}
	if n := len(blockedEverywhere()); n < 100 {
		t.Errorf("blocked-everywhere list has %d keys; the reference list has over 100", n)
	}
	// OpenClaw's override-only list had about 140 keys; the ones that load
	// code or run commands moved to blocked-everywhere (issue 12 item 6).
	if n := len(overrideOnly()); n < 90 {
		t.Errorf("override-only list has %d keys; expected at least 90", n)
	}
}

// TestCheckKeyFamilies: issue 25 finding 4. A program that reads variables
// as options, commands or configuration owns a family: every member is
// refused (and dropped from the inherited environment) except the family's
// data members; and a name that says it holds options or a configuration
// file is refused whatever program reads it. Override-only keys keep their
// rule (inherited, not settable).
func TestCheckKeyFamilies(t *testing.T) {
	tests := []struct {
		key, wantMatch string
		wantRule       Rule
	}{
		// the reported variables
		{"GIT_TEST_FSMONITOR", "GIT_", RuleBlockedFamily},
		{"RIPGREP_CONFIG_PATH", "_CONFIG_PATH", RuleBlockedSuffix},
		{"UNZIP", "UNZIP", RuleBlockedFamily},
		// each family, including members no list named
		{"GIT_TEST_ANYTHING_NEW", "GIT_", RuleBlockedFamily},
		{"git_dir", "", RuleBlocked},
		{"GIT_REFERENCE_BACKEND", "GIT_", RuleBlockedFamily},
		{"UNZIPOPT", "UNZIP", RuleBlockedFamily},
		{"ZIPINFO", "ZIP", RuleBlockedFamily},
		{"ZIPINFOOPT", "ZIP", RuleBlockedFamily},
		{"ZIP", "", RuleBlocked},
		{"TAR_OPTIONS", "", RuleBlocked},
		{"TAR_LONGLINK", "TAR_", RuleBlockedFamily},
		{"WGET_ASKPASS", "_ASKPASS", RuleBlockedSuffix},
		{"SYSTEM_WGETRC", "RC", RuleBlockedSuffix},
		{"WGETRC", "", RuleOverrideOnly},
		{"CURL_HOME", "", RuleOverrideOnly},
		{"CURL_SSL_BACKEND", "CURL_", RuleBlockedFamily},
		{"GREP_OPTIONS", "_OPTIONS", RuleBlockedSuffix},
		{"LESSOPEN", "", RuleBlocked},
		{"LESSNEWVAR", "LESS", RuleBlockedFamily},
		{"MANPATH", "", RuleOverrideOnly},
		{"MANLESS", "MAN", RuleBlockedFamily},
		{"RSYNC_PROXY", "RSYNC_", RuleBlockedFamily},
		{"SYSTEMD_PAGERSECURE", "", RuleBlocked},
		{"SYSTEMD_LOG_TARGET", "SYSTEMD_", RuleBlockedFamily},
		{"AWKPATH", "AWK", RuleBlockedFamily},
		{"AWKLIBPATH", "AWK", RuleBlockedFamily},
		{"PYTHONEXECUTABLE", "PYTHON", RuleBlockedFamily},
		{"PERL_MM_OPT", "PERL", RuleBlockedFamily},
		{"RUBYGEMS_GEMDEPS", "RUBY", RuleBlockedFamily},
		{"NODE_ICU_DATA", "NODE_", RuleBlockedFamily},
		{"HGPLAIN", "HG", RuleBlockedFamily},
		// by name: options, flags, configuration files
		{"FOO_OPTIONS", "_OPTIONS", RuleBlockedSuffix},
		{"SOMETOOL_OPTS", "_OPTS", RuleBlockedSuffix},
		{"EXTRA_CFLAGS", "FLAGS", RuleBlockedSuffix},
		{"TOOL_CONFIG_FILE", "_CONFIG_FILE", RuleBlockedSuffix},
		{"X_CONF", "_CONF", RuleBlockedSuffix},
		{"TOOLRC", "RC", RuleBlockedSuffix},
		{"AWS_CONFIG_FILE", "", RuleOverrideOnly},
		{"PIP_CONFIG_FILE", "", RuleOverrideOnly},
		// data members and ordinary variables stay accepted
		{"GIT_AUTHOR_NAME", "", ""},
		{"GIT_COMMITTER_DATE", "", ""},
		{"GIT_TERMINAL_PROMPT", "", ""},
		{"GREP_COLORS", "", ""},
		{"LESSCHARSET", "", ""},
		{"MANWIDTH", "", ""},
		{"PYTHONUNBUFFERED", "", ""},
		{"NODE_ENV", "", ""},
		{"TARGET", "", ""},
		{"ZONE", "", ""},
		{"MY_SOURCE", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := CheckKey(vocab.HostGateway, tt.key)
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("CheckKey(gateway, %s) = %v, want nil", tt.key, err)
				}
				if IsBlockedEverywhere(tt.key) {
					t.Fatalf("IsBlockedEverywhere(%s) = true", tt.key)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Rule != tt.wantRule || re.Match != tt.wantMatch {
				t.Fatalf("CheckKey(gateway, %s) = %v, want rule %s match %q", tt.key, err, tt.wantRule, tt.wantMatch)
			}
			// Blocked-everywhere rules drop the key from the inherited
			// environment too; override-only ones keep it.
			if got, want := IsBlockedEverywhere(tt.key), tt.wantRule != RuleOverrideOnly; got != want {
				t.Fatalf("IsBlockedEverywhere(%s) = %v, want %v", tt.key, got, want)
			}
			if CheckKey(vocab.HostSandbox, tt.key) != nil {
				t.Fatalf("%s refused in a sandbox", tt.key)
			}
		})
	}
	// The error names the family.
	err := CheckKey(vocab.HostGateway, "GIT_TEST_FSMONITOR")
	if err == nil || !strings.Contains(err.Error(), "(family GIT_*): git reads these variables") {
		t.Fatalf("family error: %v", err)
	}
}
