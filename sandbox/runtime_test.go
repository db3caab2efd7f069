package sandbox

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRuntimeUnknownRefused: a runtime the Engine does not list is a
// config error naming the runtimes it has, and nothing is created.
func TestRuntimeUnknownRefused(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.Runtime = "no-such-runtime" })
	_, err := m.Ensure(ctxT(t), Scope{AgentID: "rt"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Ensure with an unknown runtime: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"sandbox.docker.runtime", `"no-such-runtime"`, "has no such runtime", "runc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	list, lerr := m.List(ctxT(t))
	if lerr != nil || len(list) != 0 {
		t.Fatalf("containers after the refusal: %v %v", list, lerr)
	}
	// A malformed name is refused by the config check alone.
	bad := DefaultConfig()
	bad.Docker.Runtime = "runsc --debug"
	if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "sandbox.docker.runtime") {
		t.Fatalf("Validate(runtime %q) = %v", bad.Docker.Runtime, err)
	}
}

// TestRuntimeGVisorSupervised: with runtime runsc the sandbox runs under
// gVisor (its kernel says so), the supervisor serves it over the attach
// stream, explain shows the runtime, the first command of the new sandbox
// is told that input-wait detection is off there, and a command's process
// then offers no input-wait channel (so callers close its stdin, as on the
// plain path, rather than wait for a report that never comes).
func TestRuntimeGVisorSupervised(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.Runtime = RuntimeRunsc })
	s := Scope{AgentID: "gvisor"}
	st := startCmd(t, m, s, `dmesg | head -n 3; echo ok`, nil)
	if _, ok := st.Process.(*SupervisedExec); !ok || !st.Ensure.Created {
		t.Fatalf("first command: %T created %v warnings %q", st.Process, st.Ensure.Created, st.Warnings)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "input-wait detection is off") {
		t.Fatalf("warnings of the first command %q, want the input-wait limit", st.Warnings)
	}
	out, _, code, _ := drain(t, st.Process)
	if code != 0 || !strings.Contains(out, "gVisor") || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("under runsc: code %d, out %q (want gVisor's boot messages)", code, out)
	}
	c, err := m.first().supervisorClient(ctxT(t), st.Ensure.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Local() {
		t.Fatal("supervisor reached over a local socket under gVisor")
	}
	ex, err := m.Explain(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Runtime != RuntimeRunsc || !strings.Contains(ex.RuntimeNote, "input-wait") || ex.Hardening["runtime"] != RuntimeRunsc {
		t.Fatalf("explain: runtime %q note %q hardening runtime %v", ex.Runtime, ex.RuntimeNote, ex.Hardening["runtime"])
	}
	// A command with stdin: no input-wait channel, stdin works.
	st = startCmd(t, m, s, `read x; echo "got $x"`, func(o *ExecOptions) { o.KeepStdin = true })
	if p := mustSupervised(t, st); p.InputWaitChanged() != nil {
		t.Fatal("input-wait channel offered under gVisor, where nothing reports it")
	}
	if _, err := st.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseStdin()
	if out, _, code, _ := drain(t, st.Process); out != "got yes\n" || code != 0 {
		t.Fatalf("stdin under gVisor: %q %d", out, code)
	}
}

// TestRuntimeDefaultExplain: without a configured runtime, explain names
// the Engine's default.
func TestRuntimeDefaultExplain(t *testing.T) {
	m := newTestManager(t, nil)
	ex, err := m.Explain(ctxT(t), Scope{AgentID: "rt-default"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ex.Runtime, "the Engine's default") || ex.RuntimeNote != "" {
		t.Fatalf("explain runtime %q note %q", ex.Runtime, ex.RuntimeNote)
	}
}

// TestSupervisorIdleClose: a supervisor connection that follows nothing is
// closed after the idle time (the daemon keeps no goroutine for an idle
// sandbox), one that follows a running command is not, and the next
// command connects again.
func TestSupervisorIdleClose(t *testing.T) {
	m := newManagerOpts(t, func(o *Options) { o.SupervisorIdleClose = 300 * time.Millisecond })
	s := Scope{AgentID: "idle"}
	st := startCmd(t, m, s, `true`, nil)
	drain(t, mustSupervised(t, st))
	id := st.Ensure.ID
	waitUntil(t, func() bool { return !m.first().clients.alive(id) })
	// A command running longer than the idle time keeps its connection.
	st = startCmd(t, m, s, `sleep 1; echo done`, nil)
	out, _, code, _ := drain(t, mustSupervised(t, st))
	if out != "done\n" || code != 0 {
		t.Fatalf("command across the idle time: %q %d", out, code)
	}
	waitUntil(t, func() bool { return !m.first().clients.alive(id) })
	st = startCmd(t, m, s, `echo again`, nil)
	if out, _, code, _ := drain(t, mustSupervised(t, st)); out != "again\n" || code != 0 {
		t.Fatalf("after an idle close: %q %d", out, code)
	}
}

// TestRuntimeGVisorConcurrent: 8 concurrent commands in one gVisor
// sandbox all run. With the Engine's pids limit left at pidsLimit, gVisor's
// host tasks (a ptrace stub per process) reached it and the sentry
// panicked ("error initializing first thread: resource temporarily
// unavailable"): the sandbox exited with code 2 mid-run.
func TestRuntimeGVisorConcurrent(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.Runtime = RuntimeRunsc })
	s := Scope{AgentID: "gvisor-conc"}
	drain(t, startCmd(t, m, s, "true", nil).Process)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				st, err := m.Start(ctxT(t), s, ExecOptions{Cmd: []string{"sh", "-c", "echo ok"}})
				if err != nil {
					errs <- err
					return
				}
				out, _ := io.ReadAll(st.Stdout())
				if code, _, err := st.Wait(ctxT(t)); err != nil || code != 0 || string(out) != "ok\n" {
					errs <- fmt.Errorf("code %d out %q: %v", code, out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestGVisorRuntimeNames: both runtimes `make docker-up` registers are
// gVisor (the pids scaling and the runtime note follow), another is not.
func TestGVisorRuntimeNames(t *testing.T) {
	for _, rt := range []string{RuntimeRunsc, RuntimeRunscNet} {
		if !gvisorRuntime(rt) || !strings.Contains(runtimeNoteFor(rt), "gVisor") {
			t.Errorf("%s: gvisorRuntime %v, note %q", rt, gvisorRuntime(rt), runtimeNoteFor(rt))
		}
	}
	for _, rt := range []string{"", "runc", "kata", "runsc-other"} {
		if gvisorRuntime(rt) || strings.Contains(runtimeNoteFor(rt), "gVisor") {
			t.Errorf("%s taken for gVisor", rt)
		}
	}
}
