// Package guard decides whether a command may run on the gateway and node
// hosts (SECURITY.md: "The guard" and "External directories"). It never runs anything itself.
//
// # Flow
//
//	a := guard.Analyze(command, guard.AnalyzeEnv{Path: path, Cwd: cwd})
//	v := policy.Evaluate(a) // Run | Deny | ApprovalPending
//	switch v.Decision {
//	case vocab.DecisionRun: // exec SHELL -c v.Command; store.RecordUse(ctx, agent, v.Hits, command)
//	case vocab.DecisionApprovalPending:
//		p, _ := store.Request(ctx, guard.PendingRequest{Command: command, Argv: argv, Cwd: cwd,
//			AgentID: agent, EnvHash: guard.EnvHash(env), ResolvedPaths: guard.PersistablePaths(a),
//			Explain: a.Explain(), ...})
//		// later: r, err := store.Consume(ctx, p.ID, guard.Binding{...same fields...})
//		// OutcomeAllow → run v.Command; OutcomeDeny → denied;
//		// OutcomeFallback → policy.Fallback(a) decides.
//	}
//
// # Analysis
//
// Analyze parses with mvdan.cc/sh/v3/syntax (bash variant; no hand-written
// shell parsing) and walks the tree structurally. It accepts only: lists
// joined by `&&`, `||`, `;` and newlines; pipelines with `|`; simple
// commands whose words are literal (unquoted literals, '...', "..." without
// expansions; backslash escapes are decoded); the redirections `2>&1`,
// `>&2`/`1>&2`, `[12]>/dev/null`, `[12]>>/dev/null`, `&>/dev/null`,
// `&>>/dev/null`; and here-documents whose delimiter is quoted, or whose
// body contains no `$`, backquote or backslash. Everything else refuses the
// whole line with a Rule naming it: command/process substitution, `$VAR`
// and every other parameter expansion, arithmetic, `$'..'`/`$".."`,
// unquoted globs `* ? [` (decision: refused for every command, not only
// for non-safe bins — an agent that means a literal `*` quotes it),
// unquoted braces (except the word `{}`), unquoted `~`, other redirections,
// here-strings, `&`, `|&`, `!`, coprocesses, subshells, `{ }` groups,
// functions, if/for/while/until/case/select/time, `[[ ]]`, `((..))`, let,
// assignments in front of commands and declare/export/local/readonly,
// comments, and any node kind not listed (named by its Go type).
//
// Before parsing, the raw text is refused lexically if it contains a C0 or
// C1 control character other than tab and newline, a Unicode format
// character (bidi overrides, zero-width characters) or line/paragraph
// separator, invalid UTF-8, a
// backslash-newline (line continuation) anywhere, or the sequences `$(`,
// backquote, `<(` or `>(` anywhere — even inside single quotes or a quoted
// here-document, because an inner shell (`sh -c`) or a human reading the
// line may see them differently. A structural check for substitution nodes
// runs as well (defence in depth).
//
// Each simple command's executable is resolved on the effective PATH
// (absolute entries only; names with a slash relative to the cwd) to a
// cleaned absolute path (Segment.Path) and its symlink-free form
// (Segment.Resolved). The builtin `cd DIR` is accepted (it updates the
// possible working directories; relative executables after a cd are
// refused); builtins that evaluate strings or change the shell (eval,
// source, ., builtin, alias, trap, set, hash, export, exit, ...) are
// refused.
//
// Wrappers are peeled and what they run is analysed: env (-i -0 -v -u
// NAME, -S/--split-string STRING re-split and spliced back as env does,
// NAME=VALUE vetted by AnalyzeEnv.EnvCheck — by default
// envguard.CheckRequest(HostGateway) plus shell hooks such as CDPATH, so PATH
// and the envguard loader and interpreter hooks are refused; -u of a pinned
// host variable (LESSSECURE) is refused and env -i is rebuilt with the
// pinned variables set again),
// sh/bash/dash/zsh/ksh/mksh
// `-c STRING` (STRING analysed recursively, depth limit 4; -i, -s, -O,
// --rcfile and shells without -c are refused), nohup, timeout, nice,
// stdbuf, sudo (options skipped; -s -i -e -l -D -A ... refused), and the
// exec and command builtins. xargs, busybox, fish/csh, setsid, flock,
// chroot, watch, su, script, strace, time, parallel and similar carriers
// are refused. A shell or wrapper named through a relative path (./sh) or
// resolving outside the trusted dirs (/bin /usr/bin /usr/local/bin) is
// refused as a spoof. Unknown or abbreviated long options of wrappers are
// refused. Analysis.Segments lists what really runs, each with the wrapper
// chain it went through; Explain renders it for a human.
//
// When analysis passes, Analysis.Rebuilt is the line re-printed from the
// tree with every word single-quoted and every executable pinned to the
// absolute path that was analysed (shell -c strings are rebuilt the same
// way, recursively; cd targets get ./ so CDPATH is never consulted). That is
// what Verdict.Command executes, so globs and variables never expand (the
// safe-bin quoting rule applies to every command) and PATH cannot change
// what runs. (The pinned path is the PATH hit, not its symlink target, so
// multi-call binaries keep their argv[0]; the trusted dirs are root-owned.)
//
// # Policy
//
// Security deny|allowlist|full, ask off|on-miss|always, askFallback and
// elevated follow docs/tools.md and SECURITY.md, "The guard" (vocab.MinSecurity, vocab.MaxAsk,
// vocab.EffectiveModes, RequiresApproval; whether an elevated request is
// allowed is the session manager's decision). A segment is satisfied by an
// allowlist entry, as a safe bin, or as builtin cd; a segment run through sudo is
// satisfied only if sudo itself is allowlisted too (a privilege change is
// never granted by the inner command's entry or as a safe bin).
//
// Allowlist patterns (ParsePattern) are an executable part — a glob on the
// resolved path (`**` any, `*` no slash, `?` one non-slash character),
// case-sensitive, or a bare name — optionally followed by an argv pattern:
// the exact arguments, shell-quoted (`/usr/bin/git status`). A bare name
// matches only an executable found on PATH (argv[0] without a slash) whose
// PATH hit and symlink target are both in the trusted dirs: `./ls`, a
// workspace on PATH or a symlink out of /usr/bin never match `ls`.
//
// Trust (issue 12 items 4-5): whatever the entry, a segment is never
// satisfied (by an entry or as a safe bin) when
//   - its executable lies in Policy.UntrustedDirs (the daemon passes the
//     sandbox workspace root, sandbox-owned workspaces and rw bind
//     sources) or on a path that is not root/daemon-owned and
//     owner-writable only (securePath: a sandbox user's files fail here);
//   - its argv carries a gadget of its program (Gadget, gadgets.go: the one
//     tested table of options that make a program run a command, load code
//     or write a file it names — git -c, find -exec, sed without --sandbox,
//     tar --to-command, sort --compress-program, man -P, zip -TT ...);
//     for tar, wget, curl, rg and unzip the argv is parsed with the
//     program's full option list as its getopt does (options.go:
//     clusters, glued values, aliases, unique abbreviations; an unknown or
//     ambiguous option is refused);
//     programs whose every use runs code (interpreters, editors, command
//     readers, build tools) always carry one, and pagers and editors do
//     when the run has a PTY (typed shell escapes);
//   - it is git and a directory it may run in is one a sandbox can write
//     (the repository's config and hooks run commands).
//
// Safe bins (default cut
// uniq head tail tr wc; profiles for grep and sort too; jq always fails
// closed) must be found and resolved in the trusted dirs under their own
// name and fit their profile: bounded positionals (no file paths), known
// flags only, denied flags refused with GNU long-option prefix resolution
// (sort --compress-prog is --compress-program), abbreviations of allowed
// long options refused.
//
// External directories (gateway, Policy.Workspace set): path arguments and
// option values of cd rm cp mv mkdir touch chmod chown cat, and the path
// options and operands of tar, zip, unzip, wget and curl as their parsers
// see them (gadgetSpec.paths), that resolve
// (workdir.IsOutside: symlinks of existing components followed as the
// kernel does, relative to every possible cwd) outside the workspace make the line unsatisfied, so it needs
// approval (allowlist + on-miss; full + on-miss) unless matched by
// Policy.ExternalAllow. Only /dev/null redirect targets exist, so no
// redirect target is ever external. The check resolves names that the
// command opens again later; so a line whose decision relied on it passing
// carries Verdict.Confine (Policy.ConfineWorkspace), and the gateway runs
// it under a Landlock ruleset confined to the workspace
// (hostexec.ConfineArg): the kernel enforces at open what the check saw.
//
// # Approvals
//
// Store keeps approvals.json ({version:1, defaults, agents:{id|"*":
// {allowlist:[{id, pattern, lastUsedAt, lastUsedCommand,
// lastResolvedPath}]}}, approvals:[...]}), mode 0600, written temp + fsync
// + rename under a sync.Mutex and an flock on approvals.json.lock; every
// operation re-reads the file under the lock. A corrupt file (bad JSON,
// unknown field, wrong version, invalid pattern or mode) is ErrCorrupt and
// is never rewritten. Requests get a UUID, an 8-character slug and expire
// after 120 s (WithTimeout); decisions allow-once, allow-always, deny are
// accepted once (ErrAlreadyDecided) and only before expiry (ErrExpired).
// Check/Consume verify the binding (command, argv, cwd, agent, env hash)
// exactly (ErrBindingMismatch); Consume uses an approval up
// (ErrAlreadyConsumed on reuse). allow-always appends each segment's
// pattern (PersistablePaths) to the agent's allowlist: the resolved
// executable, or for a program with command-running options (ArgvMatched)
// its resolved path plus the exact arguments (`/usr/bin/git status`), never
// an argv that carries a gadget, and never a shell, wrapper, carrier,
// interpreter or other always-gadget program (IsShellOrWrapper, Gadget) —
// so approving `/bin/zsh -lc whoami` allowlists /usr/bin/whoami, not zsh. An
// allow-always for a line whose analysis failed persists only its passing
// segments. Requests without an agent id belong to agent "default".
package guard
