package guard

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sandboxctl/sandboxctl/envguard"
)

// ErrEnvBlocked is wrapped by the default EnvCheck when an env/sudo wrapper
// assigns a variable that hooks loaders, interpreters or tools.
var ErrEnvBlocked = errors.New("environment variable blocked")

// blockedEnv is checked after envguard's gateway rules: shell and loader
// hooks that matter for a command line (CDPATH, GLOBIGNORE, TERMINFO, ...)
// on top of SPEC §6. It only guards assignments made inside the command line
// (`env K=V cmd`, `sudo K=V cmd`); the request env is envguard's business.
// Keys are compared upper-cased.
var blockedEnv = func() map[string]bool {
	m := map[string]bool{}

	for _, k := range strings.Fields(`PATH NODE_OPTIONS NODE_PATH NODE_REDIRECT_WARNINGS NODE_REPL_EXTERNAL_MODULE NODE_REPL_HISTORY
NODE_V8_COVERAGE PYTHONHOME PYTHONPATH PYTHONSTARTUP PYTHONBREAKPOINT PERL5LIB PERL5OPT RUBYLIB RUBYOPT BASHOPTS BASH_ENV ENV
KSH_ENV SHELL SHELLOPTS PS4 IFS FPATH CDPATH GLOBIGNORE GIT_ALLOW_PROTOCOL GIT_EDITOR GIT_EXTERNAL_DIFF GIT_DIR GIT_WORK_TREE
GIT_COMMON_DIR GIT_EXEC_PATH GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE
GIT_PROTOCOL_FROM_USER GIT_SEQUENCE_EDITOR GIT_TEMPLATE_DIR GIT_SSL_NO_VERIFY GIT_SSL_CAINFO GIT_SSL_CAPATH GIT_HOOK_PATH
GIT_SSH_COMMAND GIT_SSH GIT_ASKPASS SSH_ASKPASS GIT_PAGER CC CXX CARGO_BUILD_RUSTC CARGO_BUILD_RUSTC_WRAPPER
CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER CARGO_BUILD_RUSTDOC RUSTC RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTDOC CMAKE_C_COMPILER
CMAKE_CXX_COMPILER CMAKE_TOOLCHAIN_FILE MAKE MAKEFLAGS MFLAGS CONFIG_SITE CONFIG_SHELL GCONV_PATH GLIBC_TUNABLES SSLKEYLOGFILE
JAVA_OPTS JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS DOTNET_STARTUP_HOOKS DOTNET_ADDITIONAL_DEPS MAVEN_OPTS SBT_OPTS
GRADLE_OPTS ANT_OPTS CATALINA_OPTS CORECLR_PROFILER BROWSER HGRCPATH HGEDITOR HGMERGE EXINIT VIMINIT MYVIMRC GVIMINIT
EMACSLOADPATH SVN_EDITOR SVN_SSH BZR_EDITOR BZR_SSH BZR_PLUGIN_PATH SUDO_ASKPASS JULIA_EDITOR RUBYSHELL HELM_PLUGINS
PACKER_PLUGIN_PATH VAGRANT_VAGRANTFILE ERL_AFLAGS ERL_FLAGS ERL_ZFLAGS ELIXIR_ERL_OPTIONS R_ENVIRON R_PROFILE R_ENVIRON_USER
R_PROFILE_USER TCLLIBPATH HOSTALIASES HOME ZDOTDIR PAGER EDITOR VISUAL LESSOPEN LESSCLOSE PROMPT_COMMAND OPENSSL_CONF CLASSPATH
TERMINFO TERMCAP`) {
		m[k] = true
	}
	return m
}()

var blockedEnvPrefixes = []string{"LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG_", "NPM_CONFIG_", "LUA_INIT"}

// defaultEnvCheck applies envguard's gateway rules (the authoritative
// policy: PATH, blocked-everywhere and override-only keys, any case), then
// this package's list of shell and loader hooks on top.
func defaultEnvCheck(assign map[string]string) error {
	if err := envguard.CheckRequest(envguard.HostGateway, assign); err != nil {
		return fmt.Errorf("%w: %w", ErrEnvBlocked, err)
	}
	keys := make([]string, 0, len(assign))
	for k := range assign {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !validEnvName.MatchString(k) {
			return fmt.Errorf("%q is not a valid variable name: %w", k, ErrEnvBlocked)
		}
		if blockedEnv[strings.ToUpper(k)] {
			return fmt.Errorf("%s is a blocked variable: %w", k, ErrEnvBlocked)
		}
		for _, p := range blockedEnvPrefixes {
			if strings.HasPrefix(strings.ToUpper(k), p) {
				return fmt.Errorf("%s matches the blocked prefix %s: %w", k, p, ErrEnvBlocked)
			}
		}
	}
	return nil
}
