package sandbox

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFaultPidsLimitCleanError replays issue 32 item 10 (pids limit): the
// sandbox is filled up to its pids limit but k free slots (k = 0..4, for
// real: background sleeps counted by the container's own pids cgroup) and
// a new command is started. Its answer was once the Go runtime's crash
// dump of the launcher ("fatal error: newosproc", as the command's stderr)
// or a bare fork error; now a command either runs or fails with "pids
// limit reached", never with a runtime crash.
func TestFaultPidsLimitCleanError(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.PidsLimit = 48 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := Scope{AgentID: "pids"}
	// The container's pids cgroup (v2, else v1).
	const cg = `f=/sys/fs/cgroup; [ -e $f/pids.current ] || f=/sys/fs/cgroup/pids; `
	out, code := run(t, m, s, cg+`read max < $f/pids.max; read cur < $f/pids.current; echo $max $cur`)
	var max, cur int
	if _, err := fmt.Sscanf(out, "%d %d", &max, &cur); err != nil || code != 0 || max != 48 {
		t.Fatalf("the sandbox's pids cgroup: %q (code %d)", out, code)
	}
	crash := []string{"fatal error", "newosproc", "failed to create new OS thread", "goroutine "}
	limited := 0
	for k := range 5 {
		filler := startCmd(t, m, s, fmt.Sprintf(cg+`read max < $f/pids.max
while read n < $f/pids.current; [ "$n" -lt $((max-%d)) ]; do sleep 600 & done
echo filled; wait`, k), nil)
		buf := make([]byte, 64)
		n, err := filler.Stdout().Read(buf)
		if err != nil || !strings.Contains(string(buf[:n]), "filled") {
			t.Fatalf("k=%d: filler: %q %v", k, buf[:n], err)
		}
		for try := range 3 {
			t0 := time.Now()
			st, err := m.Start(ctx, s, ExecOptions{Cmd: []string{"sh", "-c", "echo hi"}})
			var answer string
			if err != nil {
				answer = "error: " + err.Error()
			} else {
				o, e, code, sig := drain(t, st.Process)
				answer = fmt.Sprintf("exit %d%s: stdout %q stderr %q", code, sig, o, e)
			}
			t.Logf("k=%d try %d (%v): %s", k, try, time.Since(t0).Round(time.Millisecond), answer)
			for _, c := range crash {
				if strings.Contains(answer, c) {
					t.Errorf("k=%d: the answer at the pids limit is a runtime crash (%q):\n%s", k, c, answer)
				}
			}
			switch {
			case err != nil && strings.Contains(err.Error(), "pids limit reached"):
				limited++
			case err != nil:
				t.Errorf("k=%d: the answer at the pids limit does not say so: %v", k, err)
			}
		}
		if err := filler.Kill(ctx); err != nil {
			t.Fatalf("kill the filler: %v", err)
		}
		_, _, _ = filler.Wait(ctx)
		t0 := time.Now()
		for {
			out, code, err := m.Run(ctx, s, []string{"echo", "alive"})
			if err == nil && code == 0 && out == "alive\n" {
				break
			}
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("k=%d: the sandbox does not run commands 30 s after the filler ended: %q %d %v", k, out, code, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("recovery: k=%d: commands run again %v after the filler was killed", k, time.Since(t0).Round(time.Millisecond))
	}
	if limited == 0 {
		t.Fatal("no command was refused at the pids limit: the limit was not reached")
	}
}

// TestFaultPidsLimitSupervisorSurvives replays what CI once saw after
// TestFaultPidsLimitCleanError's refusals: with no pid left in the
// sandbox, the supervisor (pid 1, a Go program) needed one more OS thread
// for its own work, the kernel refused it, the Go runtime died
// ("newosproc") and took the sandbox with it, so the kill of the filler
// got "connection to the supervisor broke: EOF". Here many calls hit the
// supervisor at once while no pid is free; afterwards the filler must be
// killable through the same supervisor, and the sandbox must be the same
// one (a marker in its tmpfs survives, pid 1 started at the same time).
func TestFaultPidsLimitSupervisorSurvives(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.PidsLimit = 40 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := Scope{AgentID: "pids-sup"}
	const cg = `f=/sys/fs/cgroup; [ -e $f/pids.current ] || f=/sys/fs/cgroup/pids; `
	before, code := run(t, m, s, `echo x > /tmp/marker; cut -d' ' -f22 /proc/1/stat; grep Threads /proc/1/status`)
	if code != 0 {
		t.Fatalf("set-up: %q %d", before, code)
	}
	t.Logf("before: %q", before)
	filler := startCmd(t, m, s, cg+`read max < $f/pids.max
while read n < $f/pids.current; [ "$n" -lt $max ]; do sleep 600 & done
echo filled; wait`, nil)
	buf := make([]byte, 64)
	n, err := filler.Stdout().Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "filled") {
		t.Fatalf("filler: %q %v", buf[:n], err)
	}
	// Everything at once: starts (refused), reads of files, signals to the
	// filler that it ignores (SIGCONT), for a while.
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 6 {
				switch i % 3 {
				case 0:
					st, err := m.Start(ctx, s, ExecOptions{Cmd: []string{"true"}})
					if err == nil {
						drain(t, st.Process)
					}
				case 1:
					_ = m.ReadFiles(ctx, s, "/tmp/marker", 1<<20, io.Discard)
				case 2:
					_ = filler.Process.Signal(ctx, syscall.SIGCONT)
				}
			}
		}()
	}
	wg.Wait()
	if err := filler.Kill(ctx); err != nil {
		t.Fatalf("kill the filler after the storm at the pids limit: %v", err)
	}
	_, _, _ = filler.Wait(ctx)
	var after string
	t0 := time.Now()
	for {
		out, code, err := m.Run(ctx, s, []string{"sh", "-c", `cat /tmp/marker; cut -d' ' -f22 /proc/1/stat; grep Threads /proc/1/status`})
		if err == nil && code == 0 {
			after = out
			break
		}
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("the sandbox does not run commands 30 s after the filler ended: %q %d %v", out, code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("after: %q", after)
	bl, al := strings.Split(before, "\n"), strings.Split(after, "\n")
	if len(al) < 2 || al[0] != "x" || len(bl) < 1 || al[1] != bl[0] {
		t.Fatalf("the sandbox is not the one from before the storm (its supervisor died):\nbefore %q\nafter  %q", before, after)
	}
}
