// Package envguard owns the environment-variable policy of sandboxctl: which
// keys are valid, which are refused in a request (everywhere, or only as an
// override of a host value), which inherited variables are dropped before a
// host process starts, and how PATH is built on the gateway and node hosts.
//
// Everything here is a pure function over strings: no I/O, std only. Every
// refusal is a *RefusedError naming the key and the rule that refused it;
// errors.Is(err, ErrRefused) matches all of them.
//
// The policy by host:
//
//   - sandbox: a request key must be valid (^[A-Za-z_][A-Za-z0-9_]*$) and
//     its value free of NUL bytes; nothing else is refused, because the
//     container is the boundary and the host env is never inherited there.
//     The sandbox's own docker config env refuses credential-looking keys
//     (CheckSandboxConfigEnv).
//   - gateway and node (and any unknown host: fail closed): PATH, the
//     blocked-everywhere keys, prefixes (LD_, DYLD_, BASH_FUNC_, GIT_CONFIG,
//     GIT_TRACE, NPM_CONFIG_, ...), suffixes (_COMMAND, _PAGER, _EDITOR,
//     _ASKPASS, _RSH, _SSH; and by name _OPTIONS, _OPTS, FLAGS,
//     _CONFIG_PATH, _CONFIG_FILE, _CONF, RC), the program families
//     (default-deny: every GIT_*, RIPGREP_*, ZIP*, UNZIP*, TAR_*, WGET*,
//     CURL_*, LESS*, MAN* ... key except the family's data members, such as
//     GIT_AUTHOR_NAME; lists.go families) and the
//     CARGO_TARGET_<triple>_(LINKER|RUNNER)
//     pattern, and the override-only keys and prefixes are refused as well
//     (name rules and families yield to the override-only lists).
//     The inherited environment loses the blocked-everywhere keys
//     (SanitizeInherited) but keeps override-only ones such as HOME or
//     SSH_AUTH_SOCK, which the operator set, and gets the Pinned variables
//     (LESSSECURE=1, PAGER=/bin/cat, EDITOR/VISUAL/GIT_EDITOR=/bin/false).
//
// Blocked everywhere means: the variable makes a common program load code,
// read a configuration that can run commands, run or write what it names, or
// parse attacker-chosen data files in every process. lists.go states the
// principle, its sources and each group's reason.
//
// Matching against the lists ignores case (PATH, Path and path are all
// refused; so are ld_preload and http_proxy): Windows node hosts read the
// environment case-insensitively and some tools read lower-case variants.
//
// A typical gateway run:
//
//	if err := envguard.CheckRequest(vocab.HostGateway, req.Env); err != nil {
//		return err // names every refused key and its rule
//	}
//	env := envguard.Merge(envguard.SanitizeInherited(os.Environ()), req.Env)
//	env = envguard.Merge(env, map[string]string{"PATH": envguard.BuildPath(loginPath, pathPrepend)})
//	cmd.Env = env // never nil, so nothing else is inherited
package envguard
