// Package hostexec owns the gateway host: it spawns `SHELL -c COMMAND` on this
// machine in a new process group (pipes or a PTY through creack/pty), builds
// PATH from the login shell plus pathPrepend, passes an explicit environment
// (never the daemon's own unfiltered), and kills the whole group (SIGTERM, then
// SIGKILL after a grace period). Its sub-package guard decides whether a
// command may run at all (security and ask modes, command analysis, allowlist,
// safe bins, approvals).
//
// Every run carries a tag, SANDBOXCTL_RUN=<tag>, in its environment; every
// descendant inherits it. Kill ends the process group and then sweeps /proc
// for processes that still carry the tag, so children that called setsid or
// daemonized are killed too. Kill is idempotent and also meant for after a
// normal exit, to end what a command left running in the background.
//
// With Options.Envelope every command runs through the launcher in its
// envelope (EnvelopeArg, envelope.go): its pipes and terminal handed to an
// Identity of its own, a Landlock ruleset with every right of the kernel
// (reads everywhere but the secret locations, DefaultSecrets; writes only
// the Envelope's writable directories, or the workspace of a Spec with
// Confine), that identity, and a seccomp filter (DeniedSyscalls) with
// no_new_privs. The kernel must have Landlock ABI 3 or the command does
// not start.
//
// Without an envelope, a Spec with Confine runs through a launcher (Options.Launcher, which
// implements ConfineArg: sandboxctld) that restricts itself with a Landlock
// ruleset (ConfineRules: the directory read-write, system directories read
// and execute) and then execs the shell; without Landlock the command runs
// unconfined and its warnings say so.
//
// Output streams reach io.EOF shortly after the command exits even when a
// leftover descendant still holds them open (see Process.Stdout). Terminal
// queries such as DSR are not handled here: the sessions layer answers them
// for every host.
package hostexec
