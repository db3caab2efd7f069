package sandboxconfig

import (
	"strings"
	"testing"
)

// profile is a deny-by-default profile with one allowing rule.
func profile(rule string) string {
	return `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","write","exit_group"],"action":"SCMP_ACT_ALLOW"},` + rule + `]}`
}

// TestSecuritySeccompJudgeArgFilters is issue 25 finding 6 as a table: a
// rule whose argument filters can be true for a dangerous call opens the
// syscall, whatever the op; one that cannot (Docker's own clone rule)
// does not. On the old code every rule with args was skipped, so each
// "refused" row with args was accepted, and clone was not judged at all.
func TestSecuritySeccompJudgeArgFilters(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		opens      string // the syscall named in the refusal, "" = accepted
	}{
		{"always-true GE on unshare/setns/mount", `{"names":["unshare","setns","mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_GE"}]}`, "mount, setns, unshare"},
		{"unshare NE 0", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_NE"}]}`, "unshare"},
		{"unshare EQ CLONE_NEWUSER", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":268435456,"op":"SCMP_CMP_EQ"}]}`, "unshare"},
		{"unshare EQ CLONE_FILES only", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1024,"op":"SCMP_CMP_EQ"}]}`, ""},
		{"unshare LT CLONE_NEWNS (low flags only)", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":131072,"op":"SCMP_CMP_LT"}]}`, "unshare"}, // CLONE_NEWTIME 0x80 is below
		{"unshare LE 0x7f", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":127,"op":"SCMP_CMP_LE"}]}`, ""},
		{"unshare GT 0x7fffffff", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2147483647,"op":"SCMP_CMP_GT"}]}`, "unshare"},
		{"unshare masked: no namespace bit", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060416,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]}`, ""},
		{"unshare masked: NEWUSER bit only checked", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":268435456,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]}`, "unshare"},
		{"unshare AND: EQ 1024 and GE 0", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1024,"op":"SCMP_CMP_EQ"},{"index":1,"value":0,"op":"SCMP_CMP_GE"}]}`, ""},
		{"unshare same index twice: runc ORs them", `{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1024,"op":"SCMP_CMP_EQ"},{"index":0,"value":0,"op":"SCMP_CMP_GE"}]}`, "unshare"},
		{"impossible AND on another arg", `{"names":["mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":5,"op":"SCMP_CMP_LT"},{"index":2,"value":5,"op":"SCMP_CMP_GT"},{"index":1,"value":0,"op":"SCMP_CMP_EQ"}]}`, "mount"}, // index 1 twice: ORed
		{"unsatisfiable on one arg", `{"names":["mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":0,"op":"SCMP_CMP_LT"}]}`, ""},
		{"unsatisfiable masked", `{"names":["ptrace"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"valueTwo":2,"op":"SCMP_CMP_MASKED_EQ"}]}`, ""},
		{"EQ with NE of the same value", `{"names":["bpf"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":5,"op":"SCMP_CMP_EQ"},{"index":1,"value":0,"op":"SCMP_CMP_NE"}]}`, "bpf"},
		{"clone unconditional", `{"names":["clone"],"action":"SCMP_ACT_ALLOW"}`, "clone"},
		{"clone: Docker's default rule", `{"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060288,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]}`, ""},
		{"clone: NEWUSER allowed through a narrower mask", `{"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2080374784,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]}`, "clone"},
		{"clone: only CLONE_NEWNET set", `{"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1073741824,"valueTwo":1073741824,"op":"SCMP_CMP_MASKED_EQ"}]}`, "clone"},
		{"clone: CLONE_NEWTIME bit is the exit signal", `{"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060288,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"},{"index":1,"value":128,"op":"SCMP_CMP_EQ"}]}`, ""},
		{"clone3 with any filter", `{"names":["clone3"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_EQ"}]}`, "clone3"},
		{"keyctl, perf_event_open, userfaultfd", `{"names":["keyctl","perf_event_open","userfaultfd"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":3,"op":"SCMP_CMP_LE"}]}`, "keyctl, perf_event_open, userfaultfd"},
		{"setns EQ CLONE_NEWNET", `{"names":["setns"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":1073741824,"op":"SCMP_CMP_EQ"}]}`, "setns"},
		{"ptrace denied by action", `{"names":["ptrace"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":0,"op":"SCMP_CMP_GE"}]}`, ""},
		{"mount needs a dropped capability", `{"names":["mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_GE"}],"includes":{"caps":["CAP_SYS_ADMIN"]}}`, ""},
		{"max values", `{"names":["bpf"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":18446744073709551615,"op":"SCMP_CMP_GE"}]}`, "bpf"},
		{"GT max is false", `{"names":["bpf"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":18446744073709551615,"op":"SCMP_CMP_GT"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, err := judgeSeccomp(profile(tc.rule), nil)
			if err != nil {
				t.Fatalf("judge: %v", err)
			}
			if tc.opens == "" {
				if why != "" {
					t.Fatalf("refused %s: %s", tc.rule, why)
				}
				return
			}
			if !strings.Contains(why, "allows "+tc.opens+" ") {
				t.Fatalf("want a refusal naming %q, got %q", tc.opens, why)
			}
		})
	}
}

func TestSecuritySeccompJudgeBadFilters(t *testing.T) {
	for _, rule := range []string{
		`{"names":["mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_ALWAYS"}]}`,
		`{"names":["mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":0,"op":"SCMP_CMP_EQ"}]}`,
	} {
		if _, err := judgeSeccomp(profile(rule), nil); err == nil || !strings.Contains(err.Error(), "sandbox.docker.seccompProfile syscalls[1]") {
			t.Errorf("%s: want a clear error, got %v", rule, err)
		}
	}
}

// TestSeccompNextFixed checks the search the judge rests on against a
// brute force over 10-bit values.
func TestSeccompNextFixed(t *testing.T) {
	for mask := uint64(0); mask < 1<<10; mask += 37 {
		for v := uint64(0); v < 1<<10; v += 53 {
			val := v & mask
			for lo := uint64(0); lo < 1<<10; lo += 29 {
				want, wantOK := uint64(0), false
				for x := lo; x < 1<<10; x++ {
					if x&mask == val {
						want, wantOK = x, true
						break
					}
				}
				got, ok := nextFixed(lo, mask|^uint64(1<<10-1), val)
				if ok != wantOK || (ok && got != want) {
					t.Fatalf("nextFixed(%d, %#x, %#x) = %d %v, want %d %v", lo, mask, val, got, ok, want, wantOK)
				}
			}
		}
	}
}
