package envguard

import (
	"strings"
	"sync"
)

// The lists below are data, not code: each group carries the reason a refusal
// reports, so an agent (or the person reading the log) learns why the key is
// dangerous and not only that it is. Keys are stored upper-case and matched
// against the upper-cased key; see matchKey for why matching ignores case.
//
// The maps are built once at package initialisation from these literals and
// are never written afterwards, so they are safe for concurrent readers.

type keyGroup struct {
	reason string
	keys   []string
}

type prefixRule struct {
	prefix string
	reason string
}

// blockedEverywhereGroups are dropped from the inherited host environment and
// refused in requests on the gateway and node hosts: each one makes a program
// that merely starts (a shell, an interpreter, git, a compiler) load or run
// code the caller chose.
var blockedEverywhereGroups = []keyGroup{
	{
		reason: "loader and interpreter hooks can run code",
		keys: []string{
			"NODE_OPTIONS", "NODE_PATH", "NODE_REDIRECT_WARNINGS", "NODE_REPL_EXTERNAL_MODULE",
			"NODE_REPL_HISTORY", "NODE_V8_COVERAGE",
			"PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONBREAKPOINT",
			"PERL5LIB", "PERL5OPT", "RUBYLIB", "RUBYOPT",
			"GCONV_PATH", "GLIBC_TUNABLES",
			"JAVA_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
			"MAVEN_OPTS", "SBT_OPTS", "GRADLE_OPTS", "ANT_OPTS", "CATALINA_OPTS",
			"DOTNET_STARTUP_HOOKS", "DOTNET_ADDITIONAL_DEPS", "CORECLR_PROFILER",
			"LUA_INIT", "LUA_INIT_5_1", "LUA_INIT_5_2", "LUA_INIT_5_3", "LUA_INIT_5_4",
			"ERL_AFLAGS", "ERL_FLAGS", "ERL_ZFLAGS", "ELIXIR_ERL_OPTIONS",
			"R_ENVIRON", "R_PROFILE", "R_ENVIRON_USER", "R_PROFILE_USER",
			"TCLLIBPATH", "EMACSLOADPATH",
		},
	},
	{
		reason: "shell startup hooks can run code",
		keys: []string{
			"BASH_ENV", "ENV", "KSH_ENV", "SHELL", "SHELLOPTS", "BASHOPTS",
			"PS4", "IFS", "FPATH", "RUBYSHELL",
		},
	},
	{
		reason: "version-control hooks and settings can run commands or redirect the repository",
		keys: []string{
			"GIT_ALLOW_PROTOCOL", "GIT_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_DIR", "GIT_WORK_TREE",
			"GIT_COMMON_DIR", "GIT_EXEC_PATH", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PROTOCOL_FROM_USER",
			"GIT_SEQUENCE_EDITOR", "GIT_TEMPLATE_DIR", "GIT_SSL_NO_VERIFY", "GIT_SSL_CAINFO",
			"GIT_SSL_CAPATH", "GIT_HOOK_PATH",
			"HGRCPATH", "HGEDITOR", "HGMERGE",
			"SVN_EDITOR", "SVN_SSH", "BZR_EDITOR", "BZR_SSH", "BZR_PLUGIN_PATH",
		},
	},
	{
		reason: "build tools run the compiler or command it names",
		keys: []string{
			"CC", "CPP", "CXX", "CXXCPP",
			"CARGO_BUILD_RUSTC", "CARGO_BUILD_RUSTC_WRAPPER", "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
			"CARGO_BUILD_RUSTDOC", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTDOC",
			"CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER", "CMAKE_TOOLCHAIN_FILE",
			"MAKE", "MAKEFLAGS", "MFLAGS", "CONFIG_SITE", "CONFIG_SHELL",
		},
	},
	{
		reason: "editor and helper hooks can run commands",
		keys: []string{
			"BROWSER", "EXINIT", "VIMINIT", "MYVIMRC", "GVIMINIT", "SUDO_ASKPASS", "JULIA_EDITOR",
		},
	},
	{
		reason: "plugin search paths can load code",
		keys:   []string{"HELM_PLUGINS", "PACKER_PLUGIN_PATH", "VAGRANT_VAGRANTFILE"},
	},
	{
		reason: "it writes TLS session keys to a file",
		keys:   []string{"SSLKEYLOGFILE"},
	},
	{
		reason: "it redirects host name lookups",
		keys:   []string{"HOSTALIASES"},
	},
}

// blockedEverywherePrefixes cover whole families of loader hooks.
var blockedEverywherePrefixes = []prefixRule{
	{prefix: "LD_", reason: "loader and interpreter hooks can run code"},
	{prefix: "DYLD_", reason: "loader and interpreter hooks can run code"},
	{prefix: "BASH_FUNC_", reason: "exported shell functions run as code"},
}

// overrideOnlyGroups may be inherited from the host (the operator set them)
// but a request may not set them on the gateway or node hosts: each one
// points a tool at other configuration, another command, another server or
// other credentials.
var overrideOnlyGroups = []keyGroup{
	{
		reason: "it points tools at other configuration or code",
		keys: []string{
			"HOME", "ZDOTDIR", "GRADLE_USER_HOME", "HISTFILE", "WGETRC", "CURL_HOME",
			"PERL5DB", "PERL5DBCMD", "OPENSSL_CONF", "OPENSSL_ENGINES", "CLASSPATH",
			"CORECLR_PROFILER_PATH", "PHPRC", "PHP_INI_SCAN_DIR", "DENO_DIR", "YARN_RC_FILENAME",
			"PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_DEFAULT_ENV", "CONDA_PREFIX",
			"LUA_PATH", "LUA_CPATH", "GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE", "COMPOSER_HOME",
			"R_LIBS_USER", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "GOPATH", "GOENV",
			"TF_CLI_CONFIG_FILE", "TF_PLUGIN_CACHE_DIR",
			"XDG_CACHE_HOME", "XDG_CONFIG_DIRS", "XDG_CONFIG_HOME", "XDG_DATA_DIRS",
			"XDG_DATA_HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME",
			"ANSIBLE_CONFIG", "ANSIBLE_LIBRARY", "ANSIBLE_CALLBACK_PLUGINS",
			"ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CONNECTION_PLUGINS", "ANSIBLE_FILTER_PLUGINS",
			"ANSIBLE_INVENTORY_PLUGINS", "ANSIBLE_LOOKUP_PLUGINS", "ANSIBLE_MODULE_UTILS",
			"ANSIBLE_REMOTE_TEMP", "ANSIBLE_ROLES_PATH", "ANSIBLE_STRATEGY_PLUGINS",
		},
	},
	{
		reason: "it names a command that tools run",
		keys: []string{
			"GIT_SSH_COMMAND", "GIT_SSH", "GIT_PROXY_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS",
			"LESSOPEN", "LESSCLOSE", "PAGER", "MANPAGER", "GIT_PAGER", "EDITOR", "VISUAL",
			"FCEDIT", "SUDO_EDITOR", "PROMPT_COMMAND",
		},
	},
	{
		reason: "it changes what the compiler builds and links",
		keys: []string{
			"CFLAGS", "LDFLAGS", "CGO_CFLAGS", "CGO_LDFLAGS", "GOFLAGS", "RUSTFLAGS",
			"LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH",
		},
	},
	{
		reason: "proxy and CA settings can intercept or redirect traffic",
		keys: []string{
			"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY",
			"NODE_TLS_REJECT_UNAUTHORIZED", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
			"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
		},
	},
	{
		reason: "package-index settings can install other code",
		keys: []string{
			"PIP_INDEX_URL", "PIP_PYPI_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE",
			"PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
			"UV_INDEX", "UV_INDEX_URL", "UV_PYTHON", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX",
			"BUN_CONFIG_REGISTRY",
			"GOPROXY", "GONOSUMCHECK", "GONOSUMDB", "GONOPROXY", "GOPRIVATE",
			"RUSTUP_DIST_ROOT", "RUSTUP_DIST_SERVER", "RUSTUP_UPDATE_ROOT",
		},
	},
	{
		reason: "it points docker at another engine",
		keys:   []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT"},
	},
	{
		reason: "it swaps the credentials or identity that tools use",
		keys: []string{
			"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
			"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
			"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
			"AZURE_AUTH_LOCATION", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
			"GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG", "HELM_HOME",
			"GH_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN", "NODE_AUTH_TOKEN", "NPM_TOKEN",
			"AMQP_URL", "DATABASE_URL", "MONGODB_URI", "REDIS_URL", "SSH_AUTH_SOCK",
		},
	},
	{
		reason: "it redirects system directories",
		keys:   []string{"SYSTEMROOT", "WINDIR"},
	},
}

// overrideOnlyPrefixes cover families whose members are open-ended.
var overrideOnlyPrefixes = []prefixRule{
	{prefix: "GIT_CONFIG_", reason: "git configuration from the environment can run commands"},
	{prefix: "NPM_CONFIG_", reason: "npm settings can run scripts or change the registry"},
	{prefix: "CARGO_REGISTRIES_", reason: "cargo registry settings can install other code"},
	{prefix: "TF_VAR_", reason: "terraform input variables change what gets deployed"},
	{prefix: "XDG_", reason: "it points tools at other configuration or code"},
	{prefix: "ANSIBLE_", reason: "ansible settings can load plugins and modules"},
}

// cargoTargetPrefix and cargoTargetSuffixes describe the one pattern rule:
// CARGO_TARGET_<triple>_LINKER and CARGO_TARGET_<triple>_RUNNER make cargo run
// the named program for the target triple.
const (
	cargoTargetPrefix  = "CARGO_TARGET_"
	cargoTargetPattern = "CARGO_TARGET_<triple>_(LINKER|RUNNER)"
	cargoTargetReason  = "cargo runs the linker or runner it names"
)

var cargoTargetSuffixes = []string{"LINKER", "RUNNER"}

// The key maps are built on first use, not at program start: the light
// sandboxctl links this package for config checks and should not pay for
// them on every run.
var (
	blockedEverywhere = sync.OnceValue(func() map[string]string { return buildKeyMap(blockedEverywhereGroups) })
	overrideOnly      = sync.OnceValue(func() map[string]string { return buildKeyMap(overrideOnlyGroups) })
)

func buildKeyMap(groups []keyGroup) map[string]string {
	m := make(map[string]string)
	for _, g := range groups {
		for _, k := range g.keys {
			m[strings.ToUpper(k)] = g.reason
		}
	}
	return m
}

// matchCargoTarget reports whether upper (an upper-cased key) is
// CARGO_TARGET_<triple>_LINKER or CARGO_TARGET_<triple>_RUNNER. A bare
// CARGO_TARGET_LINKER also matches: it is not a cargo setting, and refusing it
// costs nothing.
func matchCargoTarget(upper string) bool {
	rest, ok := strings.CutPrefix(upper, cargoTargetPrefix)
	if !ok {
		return false
	}
	for _, s := range cargoTargetSuffixes {
		if rest == s || strings.HasSuffix(rest, "_"+s) {
			return true
		}
	}
	return false
}

// shellWrapperKeys are the only request keys a node keeps when the command is
// run through a shell wrapper (terminal and locale settings).
var shellWrapperKeys = map[string]bool{
	"TERM":        true,
	"LANG":        true,
	"COLORTERM":   true,
	"NO_COLOR":    true,
	"FORCE_COLOR": true,
}

const shellWrapperLocalePrefix = "LC_"

// credentialSuffixes mark keys whose value is a secret. The bare word (the
// suffix without its leading underscore, e.g. TOKEN or API_KEY) counts too.
var credentialSuffixes = []string{
	"_API_KEY", "_TOKEN", "_PASSWORD", "_PRIVATE_KEY", "_SECRET",
	"_SECRET_KEY", "_SECRET_ACCESS_KEY",
}
