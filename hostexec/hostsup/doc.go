// Package hostsup keeps the commands a daemon (or a node agent) runs on its
// own machine in a host supervisor, so that they outlive a crash of the
// daemon and a restarted daemon re-adopts them.
//
// The host supervisor is package supervisor's Server, the one that runs in
// every supervised sandbox, in a process of its own on the host: the daemon
// starts it as `sandboxctld host-supervisor --dir DIR` in a new session, and
// it serves the unix socket DIR/supervisor.sock (DIR is mode 0700 under the
// daemon's state directory). It is a child subreaper, so what a command
// leaves behind (setsid escapees, daemons) is reparented to it and stays
// findable; it is not dumpable; it forks each command with exactly the
// environment the daemon built (hostexec.Runner.Prepare) plus the run tag
// SANDBOXCTL_RUN=<session id>; and it keeps each session's output and exit
// status under DIR/<id>/. The protocol is package supervisor's.
//
// Who may connect: a peer with the daemon's uid that is not one of the
// supervisor's own descendants. Every command it runs, and everything such a
// command starts, is a descendant (orphans are reparented to it), so no
// command can take over the connection or open commands of its own through
// it. The daemon trusts a socket whose holder has its uid.
//
// Lifetime: a graceful daemon shutdown ends the sessions (as everywhere) and
// then the supervisor. A daemon that dies leaves it running with its
// sessions; the next daemon on the same state directory connects to it and
// re-adopts them, output and exit status included. If the supervisor itself
// is gone (killed, or the machine rebooted), the next daemon starts a new
// one, ends every process still tagged with a session of the old one, and
// reports those sessions as lost, with the reason: nothing it started is left
// running untracked.
package hostsup
