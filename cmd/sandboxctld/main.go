// Command sandboxctld is sandboxctl's runtime: the daemon (serve) with its
// hosts, guard and node registry, and the commands that talk to the Docker
// Engine directly or serve a protocol (sandbox, mcp, node). It also has the
// client commands of sandboxctl, which hands the runtime commands over to
// it; people normally run sandboxctl.
package main

import (
	"fmt"
	"os"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/runtimecli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == hostexec.ConfineArg {
		// The launcher of one gateway command that must stay in its
		// workspace: Landlock, then exec. It returns only on failure,
		// before anything of the command ran.
		err := hostexec.ConfineExec(os.Args[2:])
		fmt.Fprintln(os.Stderr, "sandboxctl:", err)
		os.Exit(126)
	}
	if len(os.Args) > 1 && os.Args[1] == hostexec.EnvelopeArg {
		// The launcher of every gateway command: its identity, Landlock
		// and seccomp, then exec. It returns only on failure, before
		// anything of the command ran.
		err := hostexec.EnvelopeExec(os.Args[2:])
		fmt.Fprintln(os.Stderr, "sandboxctl:", err)
		os.Exit(126)
	}
	// Auto-start (exec) runs this very binary as the daemon.
	self, _ := os.Executable()
	os.Exit(cli.Main(version, self, runtimecli.Commands))
}
