package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/sandboxctl/sandboxctl/api"

	"golang.org/x/sys/unix"
)

// ChildOOMScoreAdj is the oom_score_adj of every command the server starts
// (and so of everything they fork): when the sandbox runs out of memory
// the kernel kills a command, never the supervisor first (it keeps 0; it
// could lower its own only with CAP_SYS_RESOURCE, while raising a score
// needs no privilege).
const ChildOOMScoreAdj = 1000

// LaunchArg, as the first argument of the supervisor binary, makes it the
// launcher of one command: `supervisor --launch PATH ARGV0 ARGS...` raises
// its own OOM score to ChildOOMScoreAdj and execs PATH. Setting the score
// before the exec leaves no window in which the command could fork a
// child that keeps the supervisor's score.
const LaunchArg = "--launch"

// launchStartFD is the launcher's fd of its start pipe: the server reads
// one byte from it once the launcher got as far as the exec of the command
// or a failure of its own (launchStarted), or EOF alone when the launcher
// died before (the Go runtime could not make its threads: the sandbox's
// pids limit, at any moment before the exec).
const launchStartFD = 3

// launchStarted tells the server that the launcher reached the exec (or
// an error of its own, which it reports on stderr): it writes one byte to
// the start pipe and closes it, so the command never holds it. Written
// last, a runtime crash anywhere before it (a thread the pids limit
// refused) reads as EOF alone.
func launchStarted() {
	f := os.NewFile(launchStartFD, "launch-start")
	if f == nil {
		return
	}
	_, _ = f.Write([]byte{1})
	_ = f.Close()
}

// Launch is the launcher mode (args after LaunchArg). It returns only if
// the exec failed.
func Launch(args []string) error {
	if len(args) < 2 {
		launchStarted()
		return errors.New("launch: want PATH ARGV0 [ARGS...]")
	}
	if err := setOOMScoreAdj(0, ChildOOMScoreAdj); err != nil {
		launchStarted()
		return err
	}
	path := args[0]
	if !strings.Contains(path, "/") {
		// The supervisor could not search every PATH directory (a sandbox
		// identity's command uid may read what the supervisor may not).
		p, err := exec.LookPath(path)
		if err != nil {
			launchStarted()
			return fmt.Errorf("%s: %s", path, api.CommandNotFound)
		}
		path = p
	}
	launchStarted()
	if err := unix.Exec(path, args[1:], os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", args[0], err)
	}
	return nil
}

// setOOMScoreAdj writes /proc/PID/oom_score_adj (pid 0: this process).
func setOOMScoreAdj(pid, score int) error {
	p := "/proc/self/oom_score_adj"
	if pid > 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
	}
	if err := os.WriteFile(p, []byte(strconv.Itoa(score)), 0); err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	return nil
}
