package procfs

import (
	"os"
	"os/exec"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Stat
		bad  bool
	}{
		{in: "42 (sh) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0", want: Stat{PID: 42, State: 'S', PPID: 1, PGRP: 42, StartTime: 12345}},
		// comm with spaces and a ')' inside
		{in: "7 (a) b (c)) Z 3 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", want: Stat{PID: 7, State: 'Z', PPID: 3, PGRP: 9, StartTime: 99}},
		{in: "7 (x) S 1 2", bad: true},
		{in: "garbage", bad: true},
		{in: "x (y) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", bad: true},
	} {
		got, err := ParseStat([]byte(c.in))
		if c.bad {
			if err == nil {
				t.Errorf("%q: no error, got %+v", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	st, err := ReadStat("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.Dead() || st.StartTime == 0 {
		t.Fatalf("own stat %+v", st)
	}
}

func TestExited(t *testing.T) {
	if Exited("/proc", os.Getpid()) {
		t.Fatal("this process counts as exited")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !Exited("/proc", cmd.Process.Pid) {
		t.Fatalf("reaped pid %d counts as running", cmd.Process.Pid)
	}
}

func TestListAndHasEnv(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "PROCFS_TEST_TAG=x1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	procs, err := List("/proc")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		if p.PID == pid {
			found = p.PPID == os.Getpid()
		}
	}
	if !found {
		t.Fatalf("List: child %d with parent %d not found", pid, os.Getpid())
	}
	if !HasEnv("/proc", pid, "PROCFS_TEST_TAG=x1") {
		t.Fatal("HasEnv: the child's tag is not found")
	}
	for _, e := range []string{"PROCFS_TEST_TAG=x", "PROCFS_TEST_TAG=x12", "ROCFS_TEST_TAG=x1"} {
		if HasEnv("/proc", pid, e) {
			t.Errorf("HasEnv(%q) matched a different entry", e)
		}
	}
	if _, err := List("/nonexistent-proc"); err == nil {
		t.Fatal("List of a missing root: no error")
	}
}

// TestListSkipsMismatchedPID: gVisor shows pid 0 in the stat of an exiting
// task; List must not return it (the supervisor's orphan sweep then sent
// kill(0, SIGKILL), its own group, and the gVisor sandbox died).
func TestListSkipsMismatchedPID(t *testing.T) {
	root := t.TempDir()
	stat := func(dir, content string) {
		if err := os.MkdirAll(root+"/"+dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+"/"+dir+"/stat", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rest := " S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 44 0 0"
	stat("5", "0 (sh)"+rest)
	stat("7", "7 (sleep)"+rest)
	list, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].PID != 7 {
		t.Fatalf("List = %+v, want only pid 7", list)
	}
}

func TestNSPid(t *testing.T) {
	// In this process's own namespace the innermost pid is the pid.
	if n, err := NSPid("/proc", os.Getpid()); err != nil || n != os.Getpid() {
		t.Fatalf("NSPid(self) = %d, %v; want %d", n, err, os.Getpid())
	}
	root := t.TempDir()
	if err := os.MkdirAll(root+"/77", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root+"/77/status", []byte("Name:\tsh\nPid:\t77\nNSpid:\t77\t12\t3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := NSPid(root, 77); err != nil || n != 3 {
		t.Fatalf("NSPid of a process two namespaces down = %d, %v; want 3", n, err)
	}
	if _, err := NSPid(root, 78); err == nil {
		t.Fatal("NSPid of a missing process: no error")
	}
}
