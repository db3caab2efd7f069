package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// privateEngines starts n dockerds of the test's own (names s1, s2, ...)
// with the test image loaded, stopped when the test ends.
func privateEngines(t *testing.T, prefix string, n int) []*testDockerd {
	t.Helper()
	run, base := testEnginesDir(t, prefix)
	ctrd := sharedContainerd(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mainCli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer mainCli.Close()
	saved, err := mainCli.ImageSave(ctx, []string{testImage})
	if err != nil {
		t.Fatalf("save %s: %v", testImage, err)
	}
	var tarball bytes.Buffer
	_, err = tarball.ReadFrom(saved)
	_ = saved.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ds []*testDockerd
	for i := range n {
		d := newTestDockerd(t, base, fmt.Sprintf("s%d", i+1), run, "", ctrd)
		d.start(t)
		t.Cleanup(func() { d.stop(t) })
		cli := d.waitUp(t, 60*time.Second)
		res, err := cli.ImageLoad(ctx, bytes.NewReader(tarball.Bytes()), client.ImageLoadWithQuiet(true))
		if err == nil {
			_, _ = io.Copy(io.Discard, res)
			_ = res.Close()
		}
		_ = cli.Close()
		if err != nil {
			t.Fatalf("load %s into %s: %v", testImage, d.name, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// stallEngine stops d's dockerd (SIGSTOP) and returns the function that
// resumes it (idempotent; also run when the test ends).
func stallEngine(t *testing.T, d *testDockerd) (resume func()) {
	t.Helper()
	pid := d.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// stallTestManager is a Manager over ds; attachOnly reaches supervisors
// only through the Engine's attach stream (as from another host), never
// their local socket.
func stallTestManager(t *testing.T, ds []*testDockerd, attachOnly bool) *Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Docker.Image = testImage
	cfg.Docker.ContainerPrefix = "sbxt-" + randHex(3) + "-"
	cfg.WorkspaceRoot = t.TempDir()
	for _, d := range ds {
		cfg.Engines = append(cfg.Engines, sandboxconfig.EngineConfig{Name: d.name, Address: d.unixHost})
	}
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir(), Labels: testLabels(),
		EngineHealthInterval: 500 * time.Millisecond, SupervisorAttachOnly: attachOnly, Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestFaultStalledEngineEndsWaitingCalls replays issue 32 item 3 (calls
// already waiting): the Engine is stalled (SIGSTOP of a private dockerd)
// just as an exec on an existing sandbox (its supervisor reached through
// the Engine's attach stream) and an exec for a new scope start, before
// any health check has seen the stall. Each waited as long as the
// stall lasted (~28 s in the issue); now each ends within the health
// check's bound with an error that names the Engine as not answering.
func TestFaultStalledEngineEndsWaitingCalls(t *testing.T) {
	ds := privateEngines(t, "sbxwait-", 1)
	m := stallTestManager(t, ds, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old := Scope{AgentID: "old"}
	st, err := m.Start(ctx, old, ExecOptions{Cmd: []string{"true"}})
	if err != nil {
		t.Fatalf("first command: %v", err)
	}
	if _, _, err := st.Wait(ctx); err != nil {
		t.Fatalf("first command: %v", err)
	}

	const stall = 25 * time.Second
	resume := stallEngine(t, ds[0])
	t0 := time.Now()
	// Before the fix each call below waited for the whole stall: resume
	// then, so the test ends (and fails on the time taken).
	time.AfterFunc(stall, resume)
	type answer struct {
		took time.Duration
		err  error
	}
	answers := map[string]*answer{"existing sandbox": nil, "new scope": nil}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, scope := range map[string]Scope{"existing sandbox": old, "new scope": {AgentID: "new"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.Start(ctx, scope, ExecOptions{Cmd: []string{"true"}})
			if err == nil {
				_, _, err = s.Wait(ctx)
				err = fmt.Errorf("the command ran during the stall: %v", err)
			}
			mu.Lock()
			answers[name] = &answer{time.Since(t0), err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for name, a := range answers {
		t.Logf("recovery: an exec on the %s during a stall answered after %v: %v", name, a.took.Round(time.Millisecond), a.err)
		if !errors.Is(a.err, ErrEngineDown) || !strings.Contains(a.err.Error(), `Engine "s1"`) || !strings.Contains(a.err.Error(), "not answering") {
			t.Errorf("exec on the %s during a stall: %v, want ErrEngineDown naming Engine \"s1\" as not answering", name, a.err)
		}
		if a.took > 10*time.Second {
			t.Errorf("exec on the %s during a stall answered after %v (the stall lasts %v)", name, a.took, stall)
		}
	}

	resume()
	t1 := time.Now()
	for {
		s, err := m.Start(ctx, Scope{AgentID: "new"}, ExecOptions{Cmd: []string{"true"}})
		if err == nil {
			if _, _, err = s.Wait(ctx); err != nil {
				t.Fatalf("a command after the Engine resumed: %v", err)
			}
			break
		}
		if time.Since(t1) > 60*time.Second {
			t.Fatalf("no command runs 60 s after the Engine resumed: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("recovery: a new scope's command ran %v after SIGCONT", time.Since(t1).Round(time.Millisecond))
}

// TestFaultStalledEngineSessionsNotFailed replays issue 32 item 3 on two
// Engines: the Engine of a running command stops answering (SIGSTOP) for
// longer than the health check's bound. Its sessions were failed ("Engine
// down") while the command went on in the container; now the command is
// reported unknown (may still be running) while the Engine is stalled when
// it is followed through the Engine's attach stream, and ends with its true
// exit and whole output once the Engine answers again; followed over the
// supervisor's local socket (not through the Engine) it is seen, and ends
// with its true exit during the stall.
func TestFaultStalledEngineSessionsNotFailed(t *testing.T) {
	for _, attachOnly := range []bool{false, true} {
		name := "local socket"
		if attachOnly {
			name = "attach stream"
		}
		t.Run(name, func(t *testing.T) { stalledEngineSession(t, attachOnly) })
	}
}

func stalledEngineSession(t *testing.T, attachOnly bool) {
	ds := privateEngines(t, "sbxunk-", 2)
	m := stallTestManager(t, ds, attachOnly)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scope := Scope{AgentID: "unk"}
	st, err := m.Start(ctx, scope, ExecOptions{Cmd: []string{"sh", "-c", "echo begin; sleep 8; echo end; exit 7"}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&out, st.Stdout())
	}()
	mb, err := m.memberFor(ctx, scope, false)
	if err != nil || mb == nil {
		t.Fatalf("the scope's Engine: %v", err)
	}
	var d *testDockerd
	idx := 0
	for i, x := range ds {
		if x.name == mb.eng.Name {
			d, idx = x, i
		}
	}
	t.Logf("the command runs on Engine %q", d.name)
	doubter, ok := st.Process.(interface{ Doubt() string })
	if !ok {
		t.Fatalf("the process (%T) cannot say when its state is unknown", st.Process)
	}
	if why := doubter.Doubt(); why != "" {
		t.Fatalf("in doubt before the stall: %q", why)
	}

	resume := stallEngine(t, d)
	t0 := time.Now()
	for m.Engines()[idx].Healthy {
		if time.Since(t0) > 15*time.Second {
			t.Fatal("the stalled Engine is still reported up after 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the stalled Engine was reported down after %v", time.Since(t0).Round(time.Millisecond))
	// Past the health bound, and past the command's end.
	endedInStall := false
	for time.Since(t0) < 12*time.Second {
		select {
		case <-st.Done():
			code, sig, err := st.Wait(ctx)
			if err != nil || code != 7 {
				t.Fatalf("the command was reported ended during the stall: code %d signal %q err %v (it may still run)", code, sig, err)
			}
			endedInStall = true
		default:
			why := doubter.Doubt()
			if !attachOnly {
				// Followed over the local socket: seen, not in doubt.
				if why != "" {
					t.Fatalf("a command followed over the supervisor's local socket is in doubt while its Engine stalls: %q", why)
				}
				break
			}
			if !strings.Contains(why, "unknown") || !strings.Contains(why, `Engine "`+d.name+`"`) || !strings.Contains(why, "may still be running") {
				t.Fatalf("the state of a command on a stalled Engine: %q, want unknown naming the Engine", why)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	resume()
	t1 := time.Now()
	code, sig, err := st.Wait(ctx)
	<-read
	t.Logf("recovery: the session ended with its true exit %v after SIGCONT (ended during the stall: %v; code %d, signal %q, err %v)",
		time.Since(t1).Round(time.Millisecond), endedInStall, code, sig, err)
	if !attachOnly && !endedInStall {
		t.Error("a command followed over the supervisor's local socket did not end during the stall of its Engine")
	}
	if err != nil || code != 7 || sig != "" {
		t.Fatalf("after the stall: code %d signal %q err %v, want exit 7", code, sig, err)
	}
	if got := out.String(); got != "begin\nend\n" {
		t.Fatalf("output: %q, want begin and end", got)
	}
	for why := doubter.Doubt(); why != ""; why = doubter.Doubt() {
		if time.Since(t1) > 30*time.Second {
			t.Fatalf("still in doubt 30 s after the Engine resumed: %q", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("recovery: the Engine's sessions are known again %v after SIGCONT", time.Since(t1).Round(time.Millisecond))
}
