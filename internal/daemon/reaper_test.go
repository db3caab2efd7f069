package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reaperHelperEnv makes the test binary run reaperHelper instead of tests:
// becoming a subreaper changes the whole process, so it runs in its own.
const reaperHelperEnv = "SANDBOXCTL_TEST_REAPER_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(connectHelperEnv); path != "" {
		// Connect and leave at once, keeping nothing open.
		if _, err := net.Dial("unix", path); err != nil {
			fmt.Fprintln(os.Stderr, "connect helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(parentHelperEnv) != "" {
		// Start a child, print its pid, and keep it until stdin closes.
		child := exec.Command("sleep", "60")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "parent helper:", err)
			os.Exit(1)
		}
		fmt.Println(child.Process.Pid)
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = child.Process.Kill()
		_ = child.Wait()
		os.Exit(0)
	}
	if os.Getenv(reaperHelperEnv) != "" {
		if err := reaperHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "reaper helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// reaperHelper becomes a subreaper, then, concurrently, runs os/exec
// children (whose exit codes must arrive intact) and shells that leave an
// orphan behind. Each orphan must be re-parented to this process (not
// init) and, once it exits, reaped (no zombie left).
func reaperHelper() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := AdoptOrphans(ctx, func(string, ...any) {}); err != nil {
		return err
	}
	self := os.Getpid()
	const rounds = 20
	errc := make(chan error, 2*rounds)
	orphans := make(chan int, rounds)
	for i := range rounds {
		go func() {
			code := i % 7
			err := exec.Command("sh", "-c", "exit "+strconv.Itoa(code)).Run()
			var ee *exec.ExitError
			switch {
			case code == 0 && err == nil, errors.As(err, &ee) && ee.ExitCode() == code:
				errc <- nil
			default:
				errc <- fmt.Errorf("os/exec child %d: got %v, want exit %d", i, err, code)
			}
		}()
		go func() {
			out, err := exec.Command("sh", "-c", "sleep 1 & echo $!").Output()
			if err != nil {
				errc <- err
				return
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
			orphans <- pid
			errc <- err
		}()
	}
	for range 2 * rounds {
		if err := <-errc; err != nil {
			return err
		}
	}
	close(orphans)
	deadline := time.Now().Add(10 * time.Second)
	for pid := range orphans {
		adopted := false
		for {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				break // gone: reaped
			}
			i := strings.LastIndexByte(string(data), ')')
			f := strings.Fields(string(data)[i+1:])
			if f[1] == "0" {
				// The kernel shows no parent for a process it is
				// releasing: gone, reaped (seen in CI under load, when
				// the first look came as the sleep ended).
				break
			}
			if f[1] == strconv.Itoa(self) {
				adopted = true
			} else if !adopted {
				return fmt.Errorf("orphan %d has parent %s, not the subreaper %d", pid, f[1], self)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("orphan %d was not reaped (state %s)", pid, f[0])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// TestAdoptOrphans: orphans of commands stay in the daemon's tree and are
// reaped; os/exec's own children keep their exit status.
func TestAdoptOrphans(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), reaperHelperEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
