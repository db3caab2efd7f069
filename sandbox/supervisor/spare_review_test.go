package supervisor

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// reviewTraceArg, as the first argument of this test binary, makes it the
// tracer of TestSpareCrashTextNeverReachesACommandThatRan (traceSpareDup).
const reviewTraceArg = "--review-trace-spare-dup"

// traceSpareDup traces every thread of the spare pid (this test binary is
// run as root, or with CAP_SYS_PTRACE: the spare is not dumpable) and,
// when one returns from dup3(_, 2, _) — the spare has put the command's
// stderr in place — queues SIGQUIT on that thread and exits, which
// detaches the tracer: the thread takes the signal before its next
// instruction, as it would take one sent by a process of the sandbox at
// that moment. The Go runtime's answer to SIGQUIT is a goroutine dump on
// descriptor 2 and exit 2. It writes "traced" once it follows every
// thread, then "hit" when it sent the signal.
func traceSpareDup(pid int) error {
	runtime.LockOSThread()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return err
	}
	const opts = unix.PTRACE_O_TRACESYSGOOD | unix.PTRACE_O_TRACECLONE
	for _, d := range tasks {
		tid, _ := strconv.Atoi(d.Name())
		if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, opts, 0, 0); e != 0 {
			return e
		}
		if err := unix.PtraceInterrupt(tid); err != nil {
			return err
		}
	}
	os.Stdout.WriteString("traced\n")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		tid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err // every thread gone
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == unix.SIGTRAP|0x80: // a system call's entry or exit
			var r unix.PtraceRegs
			if unix.PtraceGetRegs(tid, &r) == nil && r.Orig_rax == unix.SYS_DUP3 &&
				int64(r.Rax) != -int64(unix.ENOSYS) && r.Rsi == 2 {
				_ = unix.Tgkill(pid, tid, unix.SIGQUIT)
				os.Stdout.WriteString("hit\n")
				os.Exit(0) // detaches every thread
			}
			_ = unix.PtraceSyscall(tid, 0)
		case sig == unix.SIGTRAP && ws.TrapCause() > 0, sig == unix.SIGSTOP && ws.TrapCause() > 0:
			_ = unix.PtraceSyscall(tid, 0) // an event stop: interrupt, clone
		default:
			_ = unix.PtraceSyscall(tid, int(sig)) // the thread's own signal
		}
	}
	return os.ErrDeadlineExceeded
}

// TestSpareCrashTextNeverReachesACommandThatRan: a spare that dies with
// the Go runtime's report (SIGQUIT from a process of the sandbox, or a
// thread it cannot make at the pids limit) once it holds the order must
// not leave that report in the output of the command that then runs: the
// command's output is its own. Here the spare is made to take SIGQUIT
// right after it put the command's stderr on its descriptor 2.
func TestSpareCrashTextNeverReachesACommandThatRan(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the tracer reads amd64 registers")
	}
	if os.Geteuid() != 0 {
		t.Skip("tracing the non-dumpable spare needs root")
	}
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	collect(t, shell(t, c, `true`, nil))
	spare := readySpare(t, s)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tracer := exec.Command(self, reviewTraceArg, strconv.Itoa(spare))
	tracer.Stderr = os.Stderr
	out, err := tracer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The server's reaper collects the tracer (wait4(-1)): its stdout
	// ending is its end.
	if err := tracer.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "traced" {
		t.Fatalf("the tracer did not trace the spare: %q", lines.Text())
	}
	proof := filepath.Join(t.TempDir(), "ran")
	p, openErr := c.Open(ctxT(t), OpenSpec{Argv: []string{"sh", "-c", `echo ran >> ` + proof + `; echo ok`}, Env: hostEnv()})
	if !lines.Scan() || lines.Text() != "hit" {
		t.Fatalf("the tracer did not stop the spare at its dup3 of stderr: %q", lines.Text())
	}
	var stdout, stderr string
	var code int
	if openErr == nil {
		stdout, stderr, code, _ = collect(t, p)
	}
	ran, _ := os.ReadFile(proof)
	switch string(ran) {
	case "":
		// Nothing ran: the open failed, or the start was reported and
		// the spare died before it exec'd the command.
		t.Logf("nothing ran: open %v, code %d", openErr, code)
	case "ran\n":
		if stdout != "ok\n" || stderr != "" || code != 0 {
			t.Fatalf("the command ran with output not its own: out %q, code %d, err %.300q", stdout, code, stderr)
		}
	default:
		t.Fatalf("the command ran %d times", strings.Count(string(ran), "ran"))
	}
}
