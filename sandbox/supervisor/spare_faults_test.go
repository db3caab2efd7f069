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

// traceSpareArg, as the first argument of this test binary, makes it a
// tracer of a spare (traceSpare): --trace-spare MODE PID.
const traceSpareArg = "--trace-spare"

// The tracer's modes.
const (
	// traceQuitAtDup2: SIGQUIT right after a dup3 onto 2 by the spare
	// or by the child it forks for the command.
	traceQuitAtDup2 = "quit-at-dup2"
	// traceHoldAtOrder: the spare stays in a ptrace stop once its
	// recvmsg of the order returned (neither SIGCONT nor a reply
	// frees it; SIGKILL ends it).
	traceHoldAtOrder = "hold-at-order"
	// traceHoldAtFork: the spare stays in a ptrace stop once its
	// vfork of the command returned (the child runs on).
	traceHoldAtFork = "hold-at-fork"
)

// traceSpare traces every thread of the spare pid and the children it
// forks (this test binary is run as root, or with CAP_SYS_PTRACE: the
// spare is not dumpable). In traceQuitAtDup2, when a thread returns from
// dup3(_, 2, _) — the command's stderr is in place, in the child the
// spare forked or in the spare itself — it queues SIGQUIT on that thread
// and exits, which detaches the tracer: the thread takes the signal
// before its next instruction, as it would take one sent by a process of
// the sandbox at that moment. The Go runtime's answer to SIGQUIT is a
// goroutine dump on descriptor 2 and exit 2. In traceHoldAtOrder, a thread
// that returns from recvmsg is left stopped until the spare dies; in
// traceHoldAtFork, one that returns from its vfork of a command. It
// writes "traced" once it follows every thread, then "hit".
func traceSpare(mode string, pid int) error {
	runtime.LockOSThread()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return err
	}
	const opts = unix.PTRACE_O_TRACESYSGOOD | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK
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
		if err == unix.ECHILD {
			return nil // every thread gone
		}
		if err != nil {
			return err
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == unix.SIGTRAP|0x80: // a system call's entry or exit
			var r unix.PtraceRegs
			exit := unix.PtraceGetRegs(tid, &r) == nil && int64(r.Rax) != -int64(unix.ENOSYS)
			switch {
			case mode == traceQuitAtDup2 && exit && r.Orig_rax == unix.SYS_DUP3 && r.Rsi == 2:
				_ = unix.Tgkill(tgidOf(tid), tid, unix.SIGQUIT)
				os.Stdout.WriteString("hit\n")
				os.Exit(0) // detaches every thread
			case mode == traceHoldAtOrder && exit && r.Orig_rax == unix.SYS_RECVMSG:
				os.Stdout.WriteString("hit\n") // and left stopped
			case mode == traceHoldAtFork && exit && r.Orig_rax == unix.SYS_CLONE && r.Rdi&unix.CLONE_VFORK != 0 && int64(r.Rax) > 0:
				os.Stdout.WriteString("hit\n") // and left stopped
			default:
				_ = unix.PtraceSyscall(tid, 0)
			}
		case sig == unix.SIGTRAP && ws.TrapCause() > 0, sig == unix.SIGSTOP && ws.TrapCause() > 0:
			_ = unix.PtraceSyscall(tid, 0) // an event stop: interrupt, clone
		default:
			_ = unix.PtraceSyscall(tid, int(sig)) // the thread's own signal
		}
	}
	return os.ErrDeadlineExceeded
}

// tgidOf is the process a thread belongs to (0 when it is gone).
func tgidOf(tid int) int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// traceSpareFor starts this test binary as the tracer of the spare pid in
// mode and returns once it traces every thread; the function it returns
// waits for the tracer's hit.
func traceSpareFor(t *testing.T, mode string, pid int) (hit func()) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the tracer reads amd64 registers")
	}
	if os.Geteuid() != 0 {
		t.Skip("tracing the non-dumpable spare needs root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tracer := exec.Command(self, traceSpareArg, mode, strconv.Itoa(pid))
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
	t.Cleanup(func() { _ = tracer.Process.Kill() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "traced" {
		t.Fatalf("the tracer did not trace the spare: %q", lines.Text())
	}
	return func() {
		t.Helper()
		if !lines.Scan() || lines.Text() != "hit" {
			t.Fatalf("the tracer (%s) did not stop the spare: %q", mode, lines.Text())
		}
	}
}

// tracedSpare starts a server whose spare launcher is ready (a first
// command ran) and traced in mode, and returns its client, the spare's
// pid and the tracer's hit (traceSpareFor).
func tracedSpare(t *testing.T, mode string) (*Client, int, func()) {
	t.Helper()
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	collect(t, shell(t, c, `true`, nil))
	spare := readySpare(t, s)
	return c, spare, traceSpareFor(t, mode, spare)
}

// TestSpareCrashTextNeverReachesACommandThatRan: a spare that dies with
// the Go runtime's report (SIGQUIT from a process of the sandbox, or a
// thread it cannot make at the pids limit) once it holds the order must
// not leave that report in the output of the command that then runs: the
// command's output is its own. Here the spare is made to take SIGQUIT
// right after it put the command's stderr on its descriptor 2.
func TestSpareCrashTextNeverReachesACommandThatRan(t *testing.T) {
	c, _, hit := tracedSpare(t, traceQuitAtDup2)
	proof := filepath.Join(t.TempDir(), "ran")
	p, openErr := c.Open(ctxT(t), OpenSpec{Argv: []string{"sh", "-c", `echo ran >> ` + proof + `; echo ok`}, Env: hostEnv()})
	hit()
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

// TestSpareStoppedWhileWaitingIsContinued: a spare that a process of the
// sandbox stopped (SIGSTOP) while it waits is continued when it is handed
// the next command, which it forks, once, without waiting spareReplyWait
// with the server's lock held.
func TestSpareStoppedWhileWaitingIsContinued(t *testing.T) {
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	collect(t, shell(t, c, `true`, nil))
	spare := readySpare(t, s)
	if err := unix.Kill(spare, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for procState(spare) != 'T' {
		if time.Now().After(deadline) {
			t.Fatalf("the spare %d did not stop", spare)
		}
		time.Sleep(5 * time.Millisecond)
	}
	forks := spareForks(s)
	count := filepath.Join(t.TempDir(), "count")
	p := shell(t, c, `echo ran >> `+count+`; echo ok`, nil)
	out, _, code, _ := collect(t, p)
	if code != 0 || out != "ok\n" || spareForks(s) != forks+1 || readySpare(t, s) != spare {
		t.Fatalf("after the spare was stopped: pid %d, code %d, out %q; the spare %d forked %d commands and is now %d",
			p.PID(), code, out, spare, spareForks(s)-forks, readySpare(t, s))
	}
	if b, _ := os.ReadFile(count); string(b) != "ran\n" {
		t.Fatalf("the command ran %q", b)
	}
}

// procState is the state letter of /proc/PID/stat (0 when gone).
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// TestSpareStalledAfterItForkedRunsNothingTwice: a spare that forked the
// command and then stops answering (held in a ptrace stop right after its
// vfork returned) is killed after spareReplyWait. The command may have
// run, so the open fails saying so, the command is not started again
// (it ran once, in the child) and nothing carrying its tag is left
// running.
func TestSpareStalledAfterItForkedRunsNothingTwice(t *testing.T) {
	c, spare, hit := tracedSpare(t, traceHoldAtFork)
	count := filepath.Join(t.TempDir(), "count")
	p, err := c.Open(ctxT(t), OpenSpec{Argv: []string{"sh", "-c", `echo ran >> ` + count + `; exec sleep 30.25`}, Env: hostEnv()})
	hit()
	if err == nil {
		collect(t, p)
		t.Fatalf("the open succeeded (pid %d) though the spare never said how it started the command", p.PID())
	}
	if !strings.Contains(err.Error(), "stopped answering") {
		t.Fatalf("open: %v", err)
	}
	if b, _ := os.ReadFile(count); string(b) != "ran\n" {
		t.Fatalf("the command ran %q", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for _, pr := range listProcs() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pr.PID) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x0030.25") && !pr.Dead() {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the unconfirmed command still run", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitGone(t, spare)
	if out, _, code, _ := collect(t, shell(t, c, `echo after`, nil)); code != 0 || out != "after\n" {
		t.Fatalf("the next command: %q %d", out, code)
	}
}
