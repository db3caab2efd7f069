package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// TestSecurityDefaultLimits: a sandbox made from the defaults has a memory,
// swap, CPU and pids limit and sized tmpfs mounts, runs commands as a
// non-root user that can write the workspace, and gives commands (and what
// they fork) a higher OOM score than the supervisor.
func TestSecurityDefaultLimits(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "limits"}
	st := startCmd(t, m, s, `id -u; echo w > /workspace/w && cat /workspace/w; cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'; cat /proc/1/oom_score_adj`, nil)
	out, errs, code, _ := drain(t, mustSupervised(t, st))
	insp, err := m.first().cli.ContainerInspect(ctxT(t), st.Ensure.ID, clientInspect())
	if err != nil {
		t.Fatal(err)
	}
	id, ok := identityOf(insp.Container.Config.Labels)
	if !ok {
		t.Fatalf("no sandbox identity: labels %v", insp.Container.Config.Labels)
	}
	if want := fmt.Sprintf("%d\nw\n1000\n1000\n0\n", id.Command); code != 0 || out != want {
		t.Errorf("uid, workspace, OOM scores: code %d out %q err %q, want %q", code, out, errs, want)
	}
	hc := insp.Container.HostConfig
	if hc.Memory != 1<<30 || hc.MemorySwap != 1<<30 || hc.NanoCPUs != 1e9 || hc.PidsLimit == nil || *hc.PidsLimit != 256 {
		t.Errorf("limits: memory %d swap %d nanoCPUs %d pids %v", hc.Memory, hc.MemorySwap, hc.NanoCPUs, hc.PidsLimit)
	}
	for path, size := range map[string]string{"/tmp": "size=268435456", "/var/tmp": "size=67108864", "/run": "size=16777216"} {
		if !strings.Contains(hc.Tmpfs[path], size) {
			t.Errorf("tmpfs %s: %q, want %s", path, hc.Tmpfs[path], size)
		}
	}
	// The supervisor starts as root and takes its own uid at once.
	var added []string
	for _, c := range insp.Container.HostConfig.CapAdd {
		added = append(added, strings.TrimPrefix(c, "CAP_"))
	}
	want := slices.Clone(supervisor.SupervisorCaps)
	slices.Sort(added)
	slices.Sort(want)
	if insp.Container.Config.User != "0:0" || !slices.Equal(added, want) {
		t.Errorf("user %q capAdd %v", insp.Container.Config.User, insp.Container.HostConfig.CapAdd)
	}
	ex, err := m.Explain(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Limits.Memory != "1g" || ex.Limits.CPUs != 1 || ex.Limits.PidsLimit != 256 || ex.Limits.Tmpfs["/tmp"] != "256MiB" || !strings.HasPrefix(ex.Limits.User, fmt.Sprintf("%d:%d (sandbox identity", id.Command, id.Command)) {
		t.Errorf("explain limits: %+v", ex.Limits)
	}
}

// leftoverScript starts two CPU spinners that outlive the command: one in
// a new session, one that also drops the SANDBOXCTL_RUN tag.
const leftoverScript = `(setsid sh -c 'while :; do :; done' &); (env -u SANDBOXCTL_RUN setsid sh -c 'while :; do :; done' &); echo started`

// strays lists the processes of the sandbox other than pid 1, the
// supervisor's spare launcher (its child, which the next command runs in)
// and the listing itself (its shell and the shell's children).
const straysScript = `for p in /proc/[0-9]*; do pid=${p#/proc/}; [ "$pid" = 1 ] && continue; [ "$pid" = $$ ] && continue; pp=$(awk '{print $4}' $p/stat 2>/dev/null); [ "$pp" = $$ ] && continue; ` +
	`[ "$pp" = 1 ] && [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" = "` + SupervisorPath + ` ` + supervisor.SpareLaunchArg + ` " ] && continue; ` +
	`[ -n "$pp" ] && echo "$pid $(tr '\0' ' ' < $p/cmdline)"; done; true`

// TestSecurityLeftoversEndWithSession replays the detached fork bomb of
// issue 12: processes a command leaves behind (setsid, even without its
// tag) must end when its session ends, not when the sandbox is removed.
func TestSecurityLeftoversEndWithSession(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "leftover"}
	out, _, code, _ := drain(t, mustSupervised(t, startCmd(t, m, s, leftoverScript, nil)))
	if code != 0 || out != "started\n" {
		t.Fatalf("spinner command: code %d out %q", code, out)
	}
	waitNoStrays(t, m, s, "")
}

// TestSecurityLeftoversEndWithSessionPlainPath: the same on the plain
// Engine exec path, for what carries the command's tag (a process that
// drops the tag and leaves the group is out of reach there; SECURITY.md).
func TestSecurityLeftoversEndWithSessionPlainPath(t *testing.T) {
	m := newManagerOpts(t, func(o *Options) { o.DisableSupervisor = true })
	s := Scope{AgentID: "leftover-plain"}
	st := startCmd(t, m, s, `(setsid sh -c 'while :; do :; done' &); echo started`, nil)
	if _, ok := st.Process.(*Exec); !ok {
		t.Fatalf("not on the plain path: %T", st.Process)
	}
	out, _, code, _ := drain(t, st.Process)
	if code != 0 || out != "started\n" {
		t.Fatalf("spinner command: code %d out %q", code, out)
	}
	waitNoStrays(t, m, s, "sleep infinity")
}

// waitNoStrays polls the sandbox's process table until nothing but pid 1
// (the supervisor; docker-init on the plain path) and the main process
// named by main (on the plain path) is left, for 10 s.
func waitNoStrays(t *testing.T, m *Manager, s Scope, main string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := run(t, m, s, straysScript)
		var strays []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			_, cmd, _ := strings.Cut(line, " ")
			if line != "" && (main == "" || strings.TrimSpace(cmd) != main) {
				strays = append(strays, line)
			}
		}
		if len(strays) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind 10 s after the session ended: %q", strays)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSecurityTmpFillFailsCommandNotSupervisor replays issue 13 item 3:
// writing 1 GiB into /tmp must fail the writer (ENOSPC, or the writer
// killed), never the supervisor, and the sandbox keeps working. Under the
// defaults the tmpfs is smaller than the memory limit; a /tmp configured
// larger than a 256m limit is capped below it (TmpfsReserve), so the
// writer gets ENOSPC there too. (Uncapped, the full tmpfs left the
// supervisor the only process to kill once dd was: about 1 run in 6 lost
// it when the next command forked.)
func TestSecurityTmpFillFailsCommandNotSupervisor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"defaults", nil},
		{"tmpfs over a 256m limit", func(c *Config) {
			c.Docker.Memory, c.Docker.MemorySwap = "256m", "256m"
			c.Docker.Tmpfs = []string{"/tmp:size=2g", "/var/tmp:size=16m", "/run:size=16m"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, tc.mutate)
			s := Scope{AgentID: "fill"}
			before, _, _, _ := drain(t, mustSupervised(t, startCmd(t, m, s, `cut -d' ' -f22 /proc/1/stat`, nil)))
			st := startCmd(t, m, s, `dd if=/dev/zero of=/tmp/big bs=1M count=1024; echo "dd=$?"`, nil)
			out, errs, code, sig := drainErr(t, mustSupervised(t, st))
			t.Logf("dd: code %d sig %q out %q err %q", code, sig, out, errs)
			if code == 0 && strings.Contains(out, "dd=0") {
				t.Errorf("dd wrote 1 GiB into /tmp: no limit held (out %q err %q)", out, errs)
			}
			if !strings.Contains(errs, "No space left on device") {
				t.Errorf("dd did not end on a full tmpfs (ENOSPC): out %q err %q", out, errs)
			}
			// The same supervisor frees the space. While the full tmpfs
			// still holds the cgroup at its limit, the OOM killer may pick
			// the cleanup's own shell before rm runs (the supervisor is
			// never its choice), so the cleanup is retried as a person
			// would; each attempt is logged.
			freed := false
			for attempt := 1; attempt <= 5 && !freed; attempt++ {
				rout, rerr, rcode, err := drainErr(t, mustSupervised(t, startCmd(t, m, s, `rm -f /tmp/big && echo freed`, nil)))
				freed = err == nil && rcode == 0 && strings.Contains(rout, "freed")
				if !freed {
					t.Logf("cleanup attempt %d: code %d out %q stderr %q err %v", attempt, rcode, rout, rerr, err)
				}
			}
			if !freed {
				t.Fatal("five attempts could not remove /tmp/big")
			}
			// And it is the same supervisor (pid 1, same start time).
			aout, _, acode, err := drainErr(t, mustSupervised(t, startCmd(t, m, s, `cut -d' ' -f22 /proc/1/stat`, nil)))
			if err != nil || acode != 0 || aout != before {
				t.Errorf("after the fill: code %d out %q err %v (supervisor start time before %q)", acode, aout, err, before)
			}
		})
	}
}
