// Command sandboxctl-supervisor is the in-container supervisor of
// sandboxctl: the main process of every sandbox (pid 1, no docker-init). It
// speaks the protocol of package supervisor on its stdin and stdout, which
// sandboxctl reaches through the Engine's attach stream, and on a unix
// socket in its state directory (the fast path of a local Engine), forks the commands
// it is asked to run, and keeps their output and exit status under
// /run/sandboxctl.
//
// Build it small (it is static whatever CGO_ENABLED says: it links
// nothing that needs cgo, see TestStaticWithCgo):
//
//	go build -trimpath -ldflags='-s -w' -o bin/sandboxctl-supervisor ./cmd/sandboxctl-supervisor
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervisor.LaunchArg {
		// One command's launcher (the server starts every command so). It
		// stays dumpable: a non-dumpable process of another uid than root
		// cannot open its own /proc/self/oom_score_adj.
		err := supervisor.Launch(os.Args[2:])
		fmt.Fprintln(os.Stderr, "sandboxctl:", err)
		os.Exit(127)
	}
	if len(os.Args) > 1 && os.Args[1] == supervisor.SpareLaunchArg {
		// A launcher started ahead of its command (the server keeps one
		// ready): it returns only if it did not exec one.
		if err := supervisor.RunSpare(); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxctl:", err)
			os.Exit(127)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == supervisor.FilesArg {
		// The files API's tool, run as a command of the sandbox; not
		// dumpable, so other processes of the sandbox cannot trace it or
		// write its memory while it moves the daemon's data.
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		os.Exit(supervisor.RunFiles(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == supervisor.RelayArg {
		// A preview's relay, run as a command of the sandbox; not
		// dumpable, as the file tool.
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		os.Exit(supervisor.RunRelay(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	// Not dumpable: processes of the sandbox may run as the same user, and
	// must not open /proc/<this>/fd (the attach stream's pipes), read its
	// memory or trace it. Commands are unaffected (execve makes them
	// dumpable). It comes first: nothing of the sandbox runs before it.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor: PR_SET_DUMPABLE:", err)
		os.Exit(1)
	}
	// A sandbox identity: pid 1 starts as root with only the supervisor's
	// capabilities and becomes its own uid at once; commands run as
	// another (supervisor.Identity).
	var cred *syscall.Credential
	if len(os.Args) > 2 && os.Args[1] == supervisor.IdentityArg {
		id, err := supervisor.ParseIdentity(os.Args[2])
		if err == nil {
			err = supervisor.BecomeSupervisor(id)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "supervisor:", err)
			os.Exit(1)
		}
		cred = id.Credential()
	}
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("sandboxctl-supervisor protocol", supervisor.ProtocolVersion)
		return
	}
	// Threads for later, made while the sandbox has pids to spare.
	supervisor.ReserveThreads(supervisor.ReservedThreads)
	// A small heap: the supervisor idles in every sandbox.
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(16 << 20)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05.000")+" "+format+"\n", args...)
	}
	// Orphans (setsid escapees, daemons) reparent to this process, so they
	// are reaped here and stay findable. As pid 1 of the container that is
	// so anyway; the subreaper covers a supervisor started under an init.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		logf("supervisor: PR_SET_CHILD_SUBREAPER: %v", err)
	}
	srv := supervisor.NewServer(supervisor.ServerOptions{
		In: os.Stdin, Out: os.Stdout, Logf: logf, BaseEnv: os.Environ(),
		Dirs: supervisor.StateDirs(),
		// sandboxctl on the Engine's host connects here through
		// /proc/PID/root; processes of the sandbox itself are refused.
		Socket: supervisor.SocketName, AcceptPeer: supervisor.OutsidePIDNamespace,
		// Commands start through this binary, which raises their OOM
		// score before they run (supervisor.LaunchArg).
		Launcher:   "/proc/self/exe",
		Credential: cred,
		// This binary is the preview relay too (supervisor.RelayArg).
		Relay: true,
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	err := srv.Serve(ctx)
	if err != nil && ctx.Err() == nil {
		logf("supervisor: input ended: %v", err)
	}
	// Stdin ended (the container's stdin was closed) or nothing reads: keep
	// serving the running commands until the container is stopped.
	<-ctx.Done()
	srv.Shutdown(2 * time.Second)
}
