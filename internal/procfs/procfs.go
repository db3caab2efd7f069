// Package procfs reads what sandboxctl needs of a process from /proc: the
// one parser of /proc/PID/stat. Standard library only, so the static
// supervisor can use it too.
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Stat is the part of /proc/PID/stat that sandboxctl uses.
type Stat struct {
	PID   int
	State byte // R, S, D, Z, X, ...
	PPID  int
	PGRP  int
	// StartTime is when the process started, in clock ticks after boot:
	// with PID, it names a process even after the pid is reused.
	StartTime uint64
}

// Dead reports a zombie or a process being reaped.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads /proc/PID/stat (under root, "/proc" normally).
func ReadStat(root string, pid int) (Stat, error) {
	data, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(data)
	if err != nil {
		return Stat{}, fmt.Errorf("%s/%d/stat: %w", root, pid, err)
	}
	return st, nil
}

// ParseStat parses "pid (comm) state ppid pgrp ... starttime(22) ...",
// where comm may hold spaces and parentheses: fields count from the last ')'.
func ParseStat(data []byte) (Stat, error) {
	open := bytes.IndexByte(data, '(')
	i := bytes.LastIndexByte(data, ')')
	if open < 1 || i < open {
		return Stat{}, fmt.Errorf("malformed stat %q", truncate(data))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("malformed stat pid: %w", err)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("malformed stat %q", truncate(data))
	}
	st := Stat{PID: pid, State: f[0][0]}
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("stat ppid: %w", err)
	}
	if st.PGRP, err = strconv.Atoi(f[2]); err != nil {
		return Stat{}, fmt.Errorf("stat pgrp: %w", err)
	}
	if st.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat starttime: %w", err)
	}
	return st, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// Exited reports whether pid has exited entirely: there is no such process,
// or it is a zombie none of whose threads still runs. (A thread-group
// leader shows Z as soon as it exits, while its other threads may still run
// and hold its files: its sockets, its locks.)
func Exited(root string, pid int) bool {
	st, err := ReadStat(root, pid)
	if err != nil {
		return true
	}
	if !st.Dead() {
		return false
	}
	tasks, err := os.ReadDir(root + "/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return true
	}
	for _, t := range tasks {
		if t.Name() == strconv.Itoa(pid) {
			continue
		}
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if ts, err := ReadStat(root+"/"+strconv.Itoa(pid)+"/task", tid); err == nil && !ts.Dead() {
			return false
		}
	}
	return true
}

// PIDs lists the pids under root ("/proc" normally): its numeric entries.
func PIDs(root string) ([]int, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// List reads the stat of every process under root. Processes that exit
// during the scan, or whose stat cannot be read, are left out.
func List(root string) ([]Stat, error) { return ListExcept(root) }

// ListExcept is List without the processes skip names: their stat is not
// read.
func ListExcept(root string, skip ...int) ([]Stat, error) {
	pids, err := PIDs(root)
	if err != nil {
		return nil, err
	}
	out := make([]Stat, 0, len(pids))
	for _, pid := range pids {
		if slices.Contains(skip, pid) {
			continue
		}
		// gVisor shows pid 0 in the stat of a task that is exiting: an
		// entry must name the pid it was listed under.
		if st, err := ReadStat(root, pid); err == nil && st.PID == pid {
			out = append(out, st)
		}
	}
	return out, nil
}

// HasEnv reports whether the environment of pid holds exactly the entry
// ("KEY=VALUE"). A zombie's environ reads empty, so a dead process never
// has one; so does a process whose environ may not be read.
func HasEnv(root string, pid int, entry string) bool {
	data, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	// Entries are NUL-terminated; compare each whole (no allocation: a
	// sweep reads every process, in rounds).
	for len(data) > 0 {
		e := data
		if i := bytes.IndexByte(data, 0); i >= 0 {
			e, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if string(e) == entry {
			return true
		}
	}
	return false
}

// NSPid is pid as its innermost pid namespace numbers it (the last field
// of NSpid in /proc/PID/status): for a process in a container, its pid
// inside the container. Without NSpid (kernels before 4.1) it is an error.
func NSPid(root string, pid int) (int, error) {
	data, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return 0, fmt.Errorf("%s/%d/status: NSpid: %w", root, pid, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s/%d/status: no NSpid line", root, pid)
}
