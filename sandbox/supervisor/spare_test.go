package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain makes this test binary the supervisor binary's launcher modes,
// so a server whose Launcher is the test binary starts commands as the
// real binary does (cmd/sandboxctl-supervisor).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case SpareLaunchArg:
			if err := RunSpare(); err != nil {
				fmt.Fprintln(os.Stderr, "sandboxctl:", err)
				os.Exit(127)
			}
			os.Exit(0)
		case traceSpareArg:
			pid, _ := strconv.Atoi(os.Args[3])
			if err := traceSpare(os.Args[2], pid); err != nil {
				fmt.Fprintln(os.Stderr, "tracer:", err)
				os.Exit(1)
			}
			os.Exit(0)
		case LaunchArg:
			err := Launch(os.Args[2:])
			fmt.Fprintln(os.Stderr, "sandboxctl:", err)
			os.Exit(127)
		}
	}
	os.Exit(m.Run())
}

// startLauncherServer is a server whose Launcher is this test binary.
func startLauncherServer(t *testing.T) (*engine, *Server) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startServerOpts(t, ServerOptions{Dirs: []string{t.TempDir()}, Launcher: self})
}

// readySpare waits until the server holds a ready spare launcher and
// returns its pid.
func readySpare(t *testing.T, s *Server) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		sp := s.spare
		s.mu.Unlock()
		if sp != nil {
			return sp.pid
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare launcher became ready within 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procStat is /proc/PID/stat's process group and session.
func procStat(t *testing.T, pid int) (pgid, sid int) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	pgid, _ = strconv.Atoi(f[2])
	sid, _ = strconv.Atoi(f[3])
	return pgid, sid
}

// spareForks is how many commands the server's spares forked.
func spareForks(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spareForks
}

// procPPID is /proc/PID/stat's parent pid.
func procPPID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	ppid, _ := strconv.Atoi(strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))[1])
	return ppid
}

// TestSpareLauncherRunsTheNextCommand: after a command, the server keeps a
// spare launcher, which forks the next commands as children of the server,
// as a launcher's fork would start them: each its own process group, the
// working directory (or the server's without one, whatever the command
// before used), the environment with its tag, output and exit code, the
// raised OOM score, and not the spare's socket. The same spare
// stays ready after each.
func TestSpareLauncherRunsTheNextCommand(t *testing.T) {
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	if out, _, code, _ := collect(t, shell(t, c, `echo first`, nil)); code != 0 || out != "first\n" {
		t.Fatalf("first command: %q %d", out, code)
	}
	spare := readySpare(t, s)
	if pgid, sid := procStat(t, spare); pgid != syscall.Getpgrp() || sid != mustSid(t) {
		t.Fatalf("the waiting spare: pgid %d sid %d", pgid, sid)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, d := range []string{dir, "", dir} {
		forks := spareForks(s)
		p := shell(t, c, `echo "$$ $(cat /proc/self/oom_score_adj) $(pwd) $SANDBOXCTL_RUN"; cut -d' ' -f5 /proc/$$/stat; ls -l /proc/self/fd | grep -c socket:; echo err >&2; sleep 0.2; exit 3`, func(o *OpenSpec) { o.Dir = d })
		ppid := procPPID(t, p.PID())
		out, errs, code, _ := collect(t, p)
		wd := d
		if d == "" {
			wd = cwd
		}
		want := fmt.Sprintf("%d %d %s %s\n%d\n0\n", p.PID(), ChildOOMScoreAdj, wd, p.ID(), p.PID())
		if out != want || errs != "err\n" || code != 3 {
			t.Fatalf("command %d through the spare: out %q (want %q) err %q code %d", i, out, want, errs, code)
		}
		if ppid != os.Getpid() || spareForks(s) != forks+1 {
			t.Fatalf("command %d: parent %d (the server is %d), %d forks by the spare", i, ppid, os.Getpid(), spareForks(s)-forks)
		}
		if now := readySpare(t, s); now != spare {
			t.Fatalf("command %d: the spare %d was replaced by %d", i, spare, now)
		}
	}
}

func mustSid(t *testing.T) int {
	t.Helper()
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// TestSpareLauncherTerminal: a PTY command the spare forks is a session
// leader with the terminal as its controlling tty.
func TestSpareLauncherTerminal(t *testing.T) {
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	collect(t, shell(t, c, `true`, nil))
	readySpare(t, s)
	forks := spareForks(s)
	p := shell(t, c, `tty >/dev/null && echo tty; cut -d' ' -f6 /proc/$$/stat; echo $$`, func(o *OpenSpec) { o.PTY, o.Cols, o.Rows = true, 80, 24 })
	out, _, code, _ := collect(t, p)
	want := fmt.Sprintf("tty\r\n%d\r\n%d\r\n", p.PID(), p.PID())
	if spareForks(s) != forks+1 || code != 0 || out != want {
		t.Fatalf("PTY through the spare (pid %d, %d forks by the spare): code %d out %q, want %q", p.PID(), spareForks(s)-forks, code, out, want)
	}
}

// TestSpareLauncherRefusals: a working directory the spare cannot enter
// fails the open with the same error as a fork, and nothing runs; a
// command not found exits 127 saying so, as through the launcher. The
// next command runs.
func TestSpareLauncherRefusals(t *testing.T) {
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	collect(t, shell(t, c, `true`, nil))
	readySpare(t, s)
	proof := t.TempDir() + "/PROOF"
	_, err := c.Open(ctxT(t), OpenSpec{Argv: []string{"sh", "-c", "touch " + proof}, Env: hostEnv(), Dir: "/nonexistent/dir"})
	if err == nil || !strings.Contains(err.Error(), "working directory /nonexistent/dir") {
		t.Fatalf("open in a missing directory: %v", err)
	}
	if _, err := os.Stat(proof); err == nil {
		t.Fatal("the command ran although its working directory is missing")
	}
	readySpare(t, s)
	p, err := c.Open(ctxT(t), OpenSpec{Argv: []string{"no-such-command-xyz"}, Env: hostEnv()})
	if err == nil {
		_, errs, code, _ := collect(t, p)
		if code != 127 || !strings.Contains(errs, "no-such-command-xyz: command not found") {
			t.Fatalf("command not found: code %d err %q", code, errs)
		}
	} else if !strings.Contains(err.Error(), "command not found") {
		t.Fatalf("command not found: %v", err)
	}
	if out, _, code, _ := collect(t, shell(t, c, `echo after`, nil)); code != 0 || out != "after\n" {
		t.Fatalf("after the refusals: %q %d", out, code)
	}
}

// TestSpareLauncherGoneOrStalled: a spare killed while it waits (a
// process of the sandbox may signal it), or one that takes the order and
// then does not answer (held here in a ptrace stop, which the SIGCONT
// sent with the order does not end), costs nothing: the next command runs
// the usual way, once (after spareReplyWait for the stalled one), and the
// spare is gone. A stop alone is continued: TestSpareStoppedWhileWaitingIsContinued.
func TestSpareLauncherGoneOrStalled(t *testing.T) {
	for _, tc := range []struct {
		name string
		// upset acts on the waiting spare; the func it returns runs once
		// the command was asked for.
		upset func(t *testing.T, spare int) func()
	}{
		{"killed", func(t *testing.T, spare int) func() {
			if err := unix.Kill(spare, unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}},
		{"stalled after the order", func(t *testing.T, spare int) func() {
			return traceSpareFor(t, traceHoldAtOrder, spare)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, s := startLauncherServer(t)
			c := newTestClient(t, e)
			collect(t, shell(t, c, `true`, nil))
			spare := readySpare(t, s)
			after := tc.upset(t, spare)
			count := t.TempDir() + "/count"
			p := shell(t, c, `echo ran >> `+count+`; echo ok`, nil)
			after()
			out, _, code, _ := collect(t, p)
			if code != 0 || out != "ok\n" || p.PID() == spare {
				t.Fatalf("pid %d (spare %d) code %d out %q", p.PID(), spare, code, out)
			}
			if b, _ := os.ReadFile(count); string(b) != "ran\n" {
				t.Fatalf("the command ran %q", b)
			}
			waitGone(t, spare)
		})
	}
}

// TestSpareLauncherEndsWithShutdown: Shutdown ends the spare.
func TestSpareLauncherEndsWithShutdown(t *testing.T) {
	e, s := startLauncherServer(t)
	c := newTestClient(t, e)
	collect(t, shell(t, c, `true`, nil))
	spare := readySpare(t, s)
	s.Shutdown(time.Second)
	waitGone(t, spare)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare != nil {
		t.Fatal("a spare is kept after Shutdown")
	}
}

// waitGone waits until pid has ended: gone, or a zombie the reaper has
// not collected yet.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spare %d still runs after 10 s: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
