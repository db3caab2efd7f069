package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestForkMountKeepsDaemonNamespace: replaceMountInContainer enters the
// container's mount namespace and root on a thread of its own. Were that
// thread the process's main thread (Go wedges a locked main thread at
// goroutine exit instead of ending it), the daemon itself would be left
// in the container's namespace and root. Many mounts in a row, then the
// process's (its main thread's: /proc/self is the thread group leader)
// mount namespace and root are what they were.
func TestForkMountKeepsDaemonNamespace(t *testing.T) {
	requireDocker(t)
	if os.Geteuid() != 0 {
		t.Skip("setns into a container's mount namespace needs root")
	}
	out, err := exec.Command("docker", "run", "-d", "--rm", "--network", "none", "--tmpfs", "/w0", "--tmpfs", "/w1", "--tmpfs", "/w2", "--tmpfs", "/w3", testImage, "sleep", "600").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	out, err = exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect: %v %s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	nsBefore, err1 := os.Readlink("/proc/self/ns/mnt")
	rootBefore, err2 := os.Readlink("/proc/self/root")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	host := t.TempDir()
	if err := os.WriteFile(host+"/mark", []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Several at once, from goroutines of their own: the scheduler runs
	// them on any thread, the main one included.
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					if err := replaceMountInContainer(pid, host, fmt.Sprintf("/w%d", w)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		ns, _ := os.Readlink("/proc/self/ns/mnt")
		root, _ := os.Readlink("/proc/self/root")
		if ns != nsBefore || root != rootBefore {
			t.Fatalf("after round %d of mounts the process is in mount namespace %s root %s, was %s %s", round, ns, root, nsBefore, rootBefore)
		}
	}
	if out, err := exec.Command("docker", "exec", id, "cat", "/w0/mark", "/w3/mark").CombinedOutput(); err != nil || string(out) != "hosthost" {
		t.Fatalf("the container sees %q %v, want the host directory", out, err)
	}
}
