package sandboxconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
)

// seccompProfile is the part of a Docker seccomp profile that decides what
// it allows.
type seccompProfile struct {
	DefaultAction string        `json:"defaultAction"`
	Syscalls      []seccompRule `json:"syscalls"`
}

type seccompRule struct {
	Name     string       `json:"name"`
	Names    []string     `json:"names"`
	Action   string       `json:"action"`
	Args     []seccompArg `json:"args"`
	Includes struct {
		Caps []string `json:"caps"`
	} `json:"includes"`
}

// seccompArg is one argument filter of a rule: argument Index compared
// with Value by Op (for SCMP_CMP_MASKED_EQ: (arg & Value) == ValueTwo).
type seccompArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

// guardedSyscalls are syscalls Docker's default profile keeps from a
// container without capabilities: they reach kernel surface (namespaces,
// mounts, tracing, BPF, keyrings, modules, the clock) a sandbox must not.
// Any call of them is dangerous, whatever its arguments.
var guardedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "clone3", "create_module", "delete_module",
	"finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "init_module", "ioperm",
	"iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr",
	"move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open",
	"pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "query_module", "quotactl",
	"quotactl_fd", "reboot", "request_key", "setns", "settimeofday", "stime", "swapoff", "swapon",
	"syslog", "umount", "umount2", "uselib", "userfaultfd", "ustat", "vm86", "vm86old",
}

// Namespace flags of clone and unshare (linux/sched.h).
const (
	cloneNewTime   = 0x00000080
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000
	// cloneNamespaces are the flags of clone's first argument that make
	// a namespace (CLONE_NEWTIME's bit is part of the exit signal there).
	cloneNamespaces = cloneNewNS | cloneNewCgroup | cloneNewUTS | cloneNewIPC | cloneNewUser | cloneNewPID | cloneNewNet
)

// flagDanger makes a call dangerous when its argument Index has any of
// Flags set; the call is harmless otherwise (clone without namespace
// flags is how every process forks).
type flagDanger struct {
	Index uint
	Flags uint64
}

// flagGuarded are syscalls dangerous only with some flags. clone3 passes
// its flags in memory, where seccomp cannot look, so any call of it is
// dangerous (it is in guardedSyscalls).
var flagGuarded = map[string]flagDanger{
	"clone":   {Index: 0, Flags: cloneNamespaces},
	"unshare": {Index: 0, Flags: cloneNamespaces | cloneNewTime},
}

// allows reports whether a seccomp action lets the syscall run.
func allows(action string) bool {
	switch strings.ToUpper(action) {
	case "SCMP_ACT_ALLOW", "SCMP_ACT_LOG":
		return true
	}
	return false
}

// judgeSeccomp returns why a seccomp setting weakens the sandbox ("" when
// it does not). value is what sandbox.docker.seccompProfile holds: empty
// or "builtin" (the Engine's default), "unconfined", or a profile's JSON.
// kept are the capabilities the container keeps: rules that apply only
// with a capability it does not have are ignored, as the Engine does.
//
// A rule that allows a guarded syscall opens it when its argument
// filters can all be true for a dangerous call (for clone and unshare: a
// namespace flag set; for the others: any call). Filters are evaluated
// with libseccomp's semantics, ANDed within a rule — except that runc
// adds every filter of a rule as a rule of its own (ORed) when two
// filters name the same argument, and so does the judge.
func judgeSeccomp(value string, kept []string) (string, error) {
	v := strings.TrimSpace(value)
	switch {
	case v == "" || v == "builtin":
		return "", nil
	case strings.EqualFold(v, "unconfined"):
		return "seccomp unconfined allows every syscall", nil
	case !strings.HasPrefix(v, "{"):
		return "", &ConfigError{Field: "sandbox.docker.seccompProfile", Value: value, Msg: "give the profile's JSON (the Engine takes its content, not a path), builtin, or nothing"}
	}
	var p seccompProfile
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return "", &ConfigError{Field: "sandbox.docker.seccompProfile", Msg: "not a seccomp profile: " + err.Error()}
	}
	if p.DefaultAction == "" {
		return "", &ConfigError{Field: "sandbox.docker.seccompProfile", Msg: "the profile has no defaultAction"}
	}
	if allows(p.DefaultAction) {
		return fmt.Sprintf("the profile's defaultAction %s allows every syscall it does not name: it is unconfined", p.DefaultAction), nil
	}
	var opened []string
	for i, r := range p.Syscalls {
		if !allows(r.Action) {
			continue
		}
		applies := true
		for _, c := range r.Includes.Caps {
			applies = applies && slices.Contains(kept, capName(c))
		}
		if !applies {
			continue
		}
		for _, n := range append([]string{r.Name}, r.Names...) {
			fd, flagged := flagGuarded[n]
			if !flagged && !slices.Contains(guardedSyscalls, n) {
				continue
			}
			var danger *flagDanger
			if flagged {
				danger = &fd
			}
			open, err := ruleCanAllow(r.Args, danger)
			if err != nil {
				return "", &ConfigError{Field: fmt.Sprintf("sandbox.docker.seccompProfile syscalls[%d]", i), Msg: err.Error()}
			}
			if open && !slices.Contains(opened, n) {
				opened = append(opened, n)
			}
		}
	}
	if len(opened) > 0 {
		sort.Strings(opened)
		return fmt.Sprintf("the profile allows %s (with namespace flags, for clone and unshare), which Docker's default profile keeps from containers", strings.Join(opened, ", ")), nil
	}
	return "", nil
}

// ruleCanAllow reports whether some call can satisfy the rule's filters
// while being dangerous (danger nil: every call is).
func ruleCanAllow(args []seccompArg, danger *flagDanger) (bool, error) {
	for _, a := range args {
		if _, err := parseCmpOp(a.Op); err != nil {
			return false, err
		}
		if a.Index > 5 {
			return false, fmt.Errorf("argument filter index %d: a syscall has arguments 0 to 5", a.Index)
		}
	}
	seen := map[uint]bool{}
	repeated := false
	for _, a := range args {
		repeated = repeated || seen[a.Index]
		seen[a.Index] = true
	}
	if repeated {
		// runc: each filter is a rule of its own.
		for _, a := range args {
			if satisfiable([]seccompArg{a}, danger) {
				return true, nil
			}
		}
		return false, nil
	}
	return satisfiable(args, danger), nil
}

// satisfiable reports whether one call can meet every filter of args (ANDed)
// and be dangerous.
func satisfiable(args []seccompArg, danger *flagDanger) bool {
	for idx := uint(0); idx <= 5; idx++ {
		var on []seccompArg
		for _, a := range args {
			if a.Index == idx {
				on = append(on, a)
			}
		}
		var need uint64
		if danger != nil && danger.Index == idx {
			need = danger.Flags
		}
		if !argSatisfiable(on, need) {
			return false
		}
	}
	return true
}

// cmpOp is a libseccomp comparison.
type cmpOp int

const (
	cmpNE cmpOp = iota
	cmpLT
	cmpLE
	cmpEQ
	cmpGE
	cmpGT
	cmpMaskedEQ
)

func parseCmpOp(s string) (cmpOp, error) {
	switch strings.ToUpper(s) {
	case "SCMP_CMP_NE":
		return cmpNE, nil
	case "SCMP_CMP_LT":
		return cmpLT, nil
	case "SCMP_CMP_LE":
		return cmpLE, nil
	case "SCMP_CMP_EQ":
		return cmpEQ, nil
	case "SCMP_CMP_GE":
		return cmpGE, nil
	case "SCMP_CMP_GT":
		return cmpGT, nil
	case "SCMP_CMP_MASKED_EQ":
		return cmpMaskedEQ, nil
	}
	return 0, fmt.Errorf("argument filter op %q is not one of SCMP_CMP_NE, LT, LE, EQ, GE, GT, MASKED_EQ", s)
}

// argSatisfiable reports whether some 64-bit value x meets every filter
// of fs and, when need is not 0, has at least one bit of need set.
func argSatisfiable(fs []seccompArg, need uint64) bool {
	lo, hi := uint64(0), uint64(math.MaxUint64)
	var fixedMask, fixedVal uint64 // bits x must have: (x & fixedMask) == fixedVal
	var excluded []uint64
	for _, f := range fs {
		op, _ := parseCmpOp(f.Op) // checked by ruleCanAllow
		switch op {
		case cmpNE:
			excluded = append(excluded, f.Value)
		case cmpLT:
			if f.Value == 0 {
				return false
			}
			hi = min(hi, f.Value-1)
		case cmpLE:
			hi = min(hi, f.Value)
		case cmpEQ:
			lo, hi = max(lo, f.Value), min(hi, f.Value)
		case cmpGE:
			lo = max(lo, f.Value)
		case cmpGT:
			if f.Value == math.MaxUint64 {
				return false
			}
			lo = max(lo, f.Value+1)
		case cmpMaskedEQ:
			if f.ValueTwo&^f.Value != 0 {
				return false // x & mask never has a bit outside mask
			}
			if (fixedVal^f.ValueTwo)&fixedMask&f.Value != 0 {
				return false // two filters want one bit both ways
			}
			fixedMask |= f.Value
			fixedVal = fixedVal&^f.Value | f.ValueTwo
		}
	}
	if lo > hi {
		return false
	}
	if need == 0 {
		return existsIn(lo, hi, fixedMask, fixedVal, excluded)
	}
	// At least one dangerous bit: try each one set.
	for b := need; b != 0; b &= b - 1 {
		bit := b & -b
		if fixedMask&bit != 0 {
			if fixedVal&bit == 0 {
				continue
			}
			if existsIn(lo, hi, fixedMask, fixedVal, excluded) {
				return true
			}
			continue
		}
		if existsIn(lo, hi, fixedMask|bit, fixedVal|bit, excluded) {
			return true
		}
	}
	return false
}

// existsIn reports whether some x in [lo, hi] with (x & mask) == val is
// not in excluded.
func existsIn(lo, hi, mask, val uint64, excluded []uint64) bool {
	x, ok := nextFixed(lo, mask, val)
	for range len(excluded) + 1 {
		if !ok || x > hi {
			return false
		}
		if !slices.Contains(excluded, x) {
			return true
		}
		if x == math.MaxUint64 {
			return false
		}
		x, ok = nextFixed(x+1, mask, val)
	}
	return false
}

// nextFixed returns the least x >= lo with (x & mask) == val. The values
// with those fixed bits are val plus any subset of the free bits, in the
// order of that subset read as a number (a deposit of it into the free
// bits), so a binary search over the subset finds it.
func nextFixed(lo, mask, val uint64) (uint64, bool) {
	free := ^mask
	n := bits.OnesCount64(free)
	deposit := func(c uint64) uint64 {
		x := val
		f := free
		for c != 0 && f != 0 {
			bit := f & -f
			if c&1 != 0 {
				x |= bit
			}
			c >>= 1
			f &= f - 1
		}
		return x
	}
	var top uint64 = math.MaxUint64
	if n < 64 {
		top = 1<<n - 1
	}
	if deposit(top) < lo {
		return 0, false
	}
	a, b := uint64(0), top // least c with deposit(c) >= lo is in [a, b]
	for a < b {
		m := a + (b-a)/2
		if deposit(m) >= lo {
			b = m
		} else {
			a = m + 1
		}
	}
	return deposit(a), true
}
