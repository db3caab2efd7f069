// Package hostexec owns the gateway host: it spawns `SHELL -c COMMAND` on this
// machine in a new process group (pipes or a PTY through creack/pty), builds
// PATH from the login shell plus pathPrepend, passes an explicit environment
// (never the daemon's own unfiltered), and kills the whole group (SIGTERM, then
// SIGKILL after a grace period). Its sub-package guard decides whether a
// command may run at all (security and ask modes, command analysis, allowlist,
// safe bins, approvals).
package hostexec
