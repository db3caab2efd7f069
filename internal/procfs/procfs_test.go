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
