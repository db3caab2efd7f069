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

// The principle (issue 12, item 6). A variable is blocked everywhere — refused
// in a request on the gateway and node hosts AND dropped from the environment
// the daemon inherited before any command starts — when it makes a common
// program that merely starts
//
//  1. load code: a preload, module, library, plugin or startup-file path, or
//     options that name such a path (PERLLIB, PYTHONPATH, NODE_OPTIONS,
//     OPENSSL_CONF, GTK_MODULES, GOFLAGS=-toolexec ...);
//  2. read a configuration that can run commands (GIT_CONFIG*, MANOPT,
//     TAR_OPTIONS, LESS, ZIPOPT, MAKEFILES, npm_config_* ...); or
//  3. run a command it names (PAGER, EDITOR, LESSOPEN, GIT_SSH_COMMAND,
//     RSYNC_RSH, BROWSER, and every key whose name says it is a command:
//     *_COMMAND, *_PAGER, *_EDITOR, *_ASKPASS, *_RSH, *_SSH), or write a file
//     it names (GIT_TRACE*, LESSHISTFILE, SSLKEYLOGFILE), or parse
//     attacker-chosen binary data in every process (LOCPATH, NLSPATH,
//     TERMINFO, TERMCAP: parsers hardened only for setuid programs).
//
// Variables that only point tools at the operator's own configuration or
// identity (HOME, XDG_*, proxies, credentials, toolchain homes) are
// override-only: a request may not set them, the inherited value stays.
//
// Sources: the programs' own manuals — perlrun(1) ENVIRONMENT, python(1),
// ruby(1), node(1), git(1) ENVIRONMENT VARIABLES and git-config(1)
// ENVIRONMENT, less(1) ENVIRONMENT VARIABLES and SECURITY, man(1) ENVIRONMENT,
// tar(1) TAR_OPTIONS, zip(1) ENVIRONMENT, rsync(1) ENVIRONMENT VARIABLES,
// make(1) MAKEFILES, go help environment (GOFLAGS, GOENV, GOTOOLCHAIN),
// ld.so(8), locale(7)/catopen(3) (LOCPATH, NLSPATH), terminfo(5) (TERMINFO,
// TERMINFO_DIRS, TERMCAP), groff(1) (GROFF_COMMAND_PREFIX, GROFF_BIN_PATH),
// openssl-env(7), gtk/gst/gio/qt module variables, systemd(1) SYSTEMD_PAGER
// and SYSTEMD_LESS; OpenClaw's host-env-security list (the first groups
// below); and published chains such as PYTHONWARNINGS + BROWSER
// (elttam, "Hacking with Environment Variables").

// blockedEverywhereGroups are dropped from the inherited host environment and
// refused in requests on the gateway and node hosts.
var blockedEverywhereGroups = []keyGroup{
	{
		reason: "loader and interpreter hooks can run code",
		keys: []string{
			"NODE_OPTIONS", "NODE_PATH", "NODE_REDIRECT_WARNINGS", "NODE_REPL_EXTERNAL_MODULE",
			"NODE_REPL_HISTORY", "NODE_V8_COVERAGE",
			"PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONBREAKPOINT", "PYTHONWARNINGS",
			"PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "PYTHONPLATLIBDIR",
			"PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "PERL5DBCMD",
			"RUBYLIB", "RUBYOPT", "GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE",
			"GCONV_PATH", "GLIBC_TUNABLES",
			"JAVA_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
			"MAVEN_OPTS", "SBT_OPTS", "GRADLE_OPTS", "ANT_OPTS", "CATALINA_OPTS",
			"DOTNET_STARTUP_HOOKS", "DOTNET_ADDITIONAL_DEPS", "CORECLR_PROFILER", "CORECLR_PROFILER_PATH",
			"LUA_INIT", "LUA_INIT_5_1", "LUA_INIT_5_2", "LUA_INIT_5_3", "LUA_INIT_5_4", "LUA_PATH", "LUA_CPATH",
			"ERL_AFLAGS", "ERL_FLAGS", "ERL_ZFLAGS", "ELIXIR_ERL_OPTIONS", "ERL_LIBS",
			"R_ENVIRON", "R_PROFILE", "R_ENVIRON_USER", "R_PROFILE_USER", "R_LIBS", "R_LIBS_USER", "R_LIBS_SITE",
			"TCLLIBPATH", "EMACSLOADPATH", "GUILE_LOAD_PATH", "GUILE_LOAD_COMPILED_PATH",
			"JULIA_LOAD_PATH", "JULIA_DEPOT_PATH", "PHPRC", "PHP_INI_SCAN_DIR", "DENO_DIR", "YARN_RC_FILENAME",
		},
	},
	{
		reason: "library and plugin search paths load code into ordinary programs",
		keys: []string{
			"OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
			"GTK_MODULES", "GTK3_MODULES", "GTK_PATH", "QT_PLUGIN_PATH", "GST_PLUGIN_PATH",
			"GST_PLUGIN_SYSTEM_PATH", "GIO_EXTRA_MODULES", "SASL_PATH", "LIBVA_DRIVERS_PATH", "KRB5_CONFIG",
			"HELM_PLUGINS", "PACKER_PLUGIN_PATH", "VAGRANT_VAGRANTFILE", "BZR_PLUGIN_PATH",
			"VIMRUNTIME", "VIM", "GROFF_BIN_PATH", "GROFF_COMMAND_PREFIX",
		},
	},
	{
		reason: "shell startup hooks can run code",
		keys: []string{
			"BASH_ENV", "ENV", "KSH_ENV", "SHELL", "SHELLOPTS", "BASHOPTS",
			"PS4", "IFS", "FPATH", "RUBYSHELL", "ZDOTDIR", "PROMPT_COMMAND",
		},
	},
	{
		reason: "version-control hooks and settings can run commands or redirect the repository",
		keys: []string{
			"GIT_ALLOW_PROTOCOL", "GIT_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_DIR", "GIT_WORK_TREE",
			"GIT_COMMON_DIR", "GIT_EXEC_PATH", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PROTOCOL_FROM_USER",
			"GIT_SEQUENCE_EDITOR", "GIT_TEMPLATE_DIR", "GIT_SSL_NO_VERIFY", "GIT_SSL_CAINFO",
			"GIT_SSL_CAPATH", "GIT_HOOK_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND",
			"GIT_ASKPASS", "GIT_PAGER", "GIT_SHELL",
			"HGRCPATH", "HGEDITOR", "HGMERGE",
			"SVN_EDITOR", "SVN_SSH", "BZR_EDITOR", "BZR_SSH", "CVS_RSH", "CVS_SERVER", "CVSEDITOR",
		},
	},
	{
		reason: "build tools run the compiler, flags or command it names",
		keys: []string{
			"CC", "CPP", "CXX", "CXXCPP",
			"CARGO_BUILD_RUSTC", "CARGO_BUILD_RUSTC_WRAPPER", "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
			"CARGO_BUILD_RUSTDOC", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTDOC",
			"RUSTFLAGS", "RUSTDOCFLAGS", "RUSTUP_TOOLCHAIN",
			"CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER", "CMAKE_TOOLCHAIN_FILE",
			"MAKE", "MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS", "MAKEFILES", "CONFIG_SITE", "CONFIG_SHELL",
			"GOFLAGS", "GOENV", "GOTOOLCHAIN",
			"CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CGO_CFLAGS", "CGO_CXXFLAGS", "CGO_CPPFLAGS", "CGO_LDFLAGS",
		},
	},
	{
		reason: "it names a command, pager or editor that tools run",
		keys: []string{
			"BROWSER", "PAGER", "MANPAGER", "EDITOR", "VISUAL", "FCEDIT", "SUDO_EDITOR", "SUDO_ASKPASS",
			"SSH_ASKPASS", "JULIA_EDITOR", "LESSOPEN", "LESSCLOSE", "LESSEDIT", "SYSTEMD_PAGER",
			"RSYNC_RSH", "RSYNC_CONNECT_PROG", "TAPE",
		},
	},
	{
		reason: "it injects options or a configuration that can run commands",
		keys: []string{
			"EXINIT", "VIMINIT", "MYVIMRC", "GVIMINIT",
			"LESS", "LESSKEY", "LESSKEYIN", "LESSKEY_SYSTEM", "LESSKEYIN_SYSTEM", "LESSKEY_CONTENT",
			"LESSMETACHARS", "LESSMETAESCAPE", "LESSSECURE", "LESSSECURE_ALLOW", "SYSTEMD_LESS",
			"SYSTEMD_PAGERSECURE", "MANOPT", "MANROFFOPT", "TAR_OPTIONS", "ZIPOPT", "ZIP", "GIT_CONFIG",
		},
	},
	{
		reason: "it makes every program parse files the caller chose (parsers hardened only for setuid programs)",
		keys:   []string{"LOCPATH", "NLSPATH", "TERMINFO", "TERMINFO_DIRS", "TERMCAP", "TERMPATH", "RESOLV_HOST_CONF"},
	},
	{
		reason: "it writes to a file it names",
		keys:   []string{"SSLKEYLOGFILE", "LESSHISTFILE"},
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
	{prefix: "GIT_CONFIG", reason: "git configuration from the environment can run commands"},
	{prefix: "GIT_TRACE", reason: "git writes traces to the file it names"},
	{prefix: "NPM_CONFIG_", reason: "npm settings can run scripts (script-shell, node-options)"},
	{prefix: "LUA_INIT", reason: "loader and interpreter hooks can run code"},
}

// blockedEverywhereSuffixes: a key whose name says it holds a command.
var blockedEverywhereSuffixes = []prefixRule{
	{prefix: "_COMMAND", reason: "its name says it holds a command that a tool runs"},
	{prefix: "_PAGER", reason: "its name says it holds a pager that a tool runs"},
	{prefix: "_EDITOR", reason: "its name says it holds an editor that a tool runs"},
	{prefix: "_ASKPASS", reason: "its name says it holds a program that a tool runs"},
	{prefix: "_RSH", reason: "its name says it holds a remote-shell command"},
	{prefix: "_SSH", reason: "its name says it holds an ssh command"},
}

// blockedEverywhereNameSuffixes: a key whose name says it holds options, a
// command line or the path of a configuration file (issue 25 finding 4: the
// lists above named TAR_OPTIONS and ZIPOPT, not GREP_OPTIONS or
// RIPGREP_CONFIG_PATH). Unlike blockedEverywhereSuffixes they yield to the
// override-only lists (AWS_CONFIG_FILE, PIP_CONFIG_FILE stay inherited).
var blockedEverywhereNameSuffixes = []prefixRule{
	{prefix: "_OPTIONS", reason: "its name says it holds options that a program parses"},
	{prefix: "_OPTS", reason: "its name says it holds options that a program parses"},
	{prefix: "FLAGS", reason: "its name says it holds flags that a program parses"},
	{prefix: "_CONFIG_PATH", reason: "its name says it holds a configuration file that a program reads"},
	{prefix: "_CONFIG_FILE", reason: "its name says it holds a configuration file that a program reads"},
	{prefix: "_CONF", reason: "its name says it holds a configuration file that a program reads"},
	{prefix: "RC", reason: "its name says it holds a run-commands (configuration) file"},
}

// family is the variable namespace of a program that reads variables as
// options, a command line or a configuration (issue 25 finding 4: git read
// GIT_TEST_FSMONITOR as a hook, ripgrep RIPGREP_CONFIG_PATH, unzip UNZIP as
// options). Default-deny: every key that starts with one of prefixes is
// blocked everywhere except the members in allow, which the program reads
// as data (names, dates, colours, switches that run and write nothing).
// Keys on the override-only lists keep that treatment (the operator's
// MANPATH or CURL_HOME stays inherited; a request may not set them).
type family struct {
	program  string
	prefixes []string
	allow    []string
}

// families: each program's namespace, from its manual's ENVIRONMENT
// section (git(1) ENVIRONMENT VARIABLES — GIT_TEST_* are read too, and
// undocumented; rg(1) RIPGREP_CONFIG_PATH; zip(1)/unzip(1) ZIP ZIPOPT UNZIP
// UNZIPOPT ZIPINFO ZIPINFOOPT; tar(1) TAR_OPTIONS; wget(1) WGETRC
// SYSTEM_WGETRC WGET_ASKPASS; curl(1) CURL_HOME; grep(1) GREP_OPTIONS;
// less(1); man(1); rsync(1); systemd(1); gawk(1) AWKPATH AWKLIBPATH; the
// interpreters' own variables).
var families = []family{
	{program: "git", prefixes: []string{"GIT_"}, allow: []string{
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
		"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
		"GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_MERGE_AUTOEDIT", "GIT_FLUSH",
		"GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS",
	}},
	{program: "ripgrep", prefixes: []string{"RIPGREP_", "RG_"}},
	{program: "zip/unzip", prefixes: []string{"ZIP", "UNZIP"}},
	{program: "tar", prefixes: []string{"TAR_"}},
	{program: "wget", prefixes: []string{"WGET", "SYSTEM_WGETRC"}},
	{program: "curl", prefixes: []string{"CURL_", "CURLOPT_"}},
	{program: "grep", prefixes: []string{"GREP_"}, allow: []string{"GREP_COLOR", "GREP_COLORS"}},
	{program: "less", prefixes: []string{"LESS"}, allow: []string{"LESSCHARSET", "LESSCHARDEF", "LESSUTFCHARDEF"}},
	{program: "man", prefixes: []string{"MAN"}, allow: []string{"MANWIDTH", "MANSECT", "MAN_KEEP_FORMATTING"}},
	{program: "rsync", prefixes: []string{"RSYNC_"}},
	{program: "systemd", prefixes: []string{"SYSTEMD_"}, allow: []string{"SYSTEMD_COLORS", "SYSTEMD_URLIFY"}},
	{program: "awk", prefixes: []string{"AWK"}},
	{program: "python", prefixes: []string{"PYTHON"}, allow: []string{
		"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONUTF8",
		"PYTHONHASHSEED", "PYTHONFAULTHANDLER", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
	}},
	{program: "perl", prefixes: []string{"PERL"}},
	{program: "ruby", prefixes: []string{"RUBY"}},
	{program: "node", prefixes: []string{"NODE_"}, allow: []string{"NODE_ENV", "NODE_NO_WARNINGS", "NODE_DISABLE_COLORS"}},
	{program: "vim", prefixes: []string{"VIM", "EXINIT", "GVIMINIT", "MYVIMRC"}},
	{program: "mercurial", prefixes: []string{"HG"}},
	{program: "subversion", prefixes: []string{"SVN_"}},
	{program: "bazaar", prefixes: []string{"BZR_"}},
	{program: "cvs", prefixes: []string{"CVS"}},
}

// overrideOnlyGroups may be inherited from the host (the operator set them)
// but a request may not set them on the gateway or node hosts: each one
// points a tool at other configuration, another server or other credentials.
var overrideOnlyGroups = []keyGroup{
	{
		reason: "it points tools at other configuration or code",
		keys: []string{
			"HOME", "GRADLE_USER_HOME", "HISTFILE", "WGETRC", "CURL_HOME", "GNUPGHOME", "INPUTRC",
			"YARN_CACHE_FOLDER", "VIRTUAL_ENV", "CONDA_DEFAULT_ENV", "CONDA_PREFIX", "COMPOSER_HOME",
			"CARGO_HOME", "RUSTUP_HOME", "GOPATH", "GOROOT", "MANPATH",
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
		reason: "it changes what the compiler builds and links",
		keys: []string{
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
		keys:   []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "DOCKER_CONFIG"},
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
	{prefix: "CARGO_REGISTRIES_", reason: "cargo registry settings can install other code"},
	{prefix: "TF_VAR_", reason: "terraform input variables change what gets deployed"},
	{prefix: "XDG_", reason: "it points tools at other configuration or code"},
	{prefix: "ANSIBLE_", reason: "ansible settings can load plugins and modules"},
}

// pinned are set in the base environment of every gateway and node command
// whatever was inherited (SanitizeInherited adds them), and a request may not
// change them (they are blocked above; exactly the pinned value is accepted).
// Agents drive programs through pipes or a PTY, never through an interactive
// pager or editor, and those take shell escapes:
//
//   - PAGER=/bin/cat: man, git, systemctl, psql ... page through cat (man
//     reads MANPAGER first, git GIT_PAGER and core.pager: MANPAGER and
//     GIT_PAGER are blocked, core.pager is the operator's);
//   - LESSSECURE=1: less(1) secure mode (less(1) SECURITY) for the less that
//     still runs (core.pager, an explicit less): no !, |, v, :e, LESSOPEN,
//     log or history files;
//   - EDITOR, VISUAL, GIT_EDITOR=/bin/false: git commit, crontab -e,
//     systemctl edit ... fail at once instead of opening vi, whose :!cmd an
//     agent could type (git reads GIT_EDITOR before core.editor).
var pinned = map[string]string{
	"LESSSECURE": "1",
	"PAGER":      "/bin/cat",
	"EDITOR":     "/bin/false",
	"VISUAL":     "/bin/false",
	"GIT_EDITOR": "/bin/false",
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
