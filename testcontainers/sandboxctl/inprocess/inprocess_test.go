package inprocess_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/inprocess"
)

const testImage = "sandboxctl/testbb:1"

// runContainers lists the containers of a run (running or not).
func runContainers(t *testing.T, cli *client.Client, runID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", sandboxctl.LabelRun+"="+runID)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Items {
		names = append(names, strings.Join(c.Names, ","))
	}
	return names
}

func text(r sandboxctl.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestInProcessSandboxLifecycle runs a command in a real sandbox, copies
// files in and out through the Engine, polls and kills a background
// session, explains the sandbox, and checks that Terminate leaves no
// container of the run behind while it carried the testcontainers labels.
func TestInProcessSandboxLifecycle(t *testing.T) {
	cli := dockertest.Require(t, testImage)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := inprocess.Run(ctx, sandboxctl.WithImage(testImage), sandboxctl.WithAgentID("alice"),
		sandboxctl.WithLabels(map[string]string{"sandboxctl.test": "testcontainers"}))
	if err != nil {
		t.Fatal(err)
	}
	terminated := false
	t.Cleanup(func() {
		if !terminated {
			_ = sb.Terminate(context.Background())
		}
	})
	runID := sb.Settings().RunID()

	// The sandbox exists once Run returned, with the testcontainers labels.
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", sandboxctl.LabelRun+"="+runID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("containers of the run after Run: %d, want the one sandbox", len(list.Items))
	}
	labels := list.Items[0].Labels
	// sandboxctl.supervisor: the supervisor (built by the package) is pid 1.
	for _, k := range []string{"org.testcontainers", "org.testcontainers.sessionId", "sandboxctl.managed", "sandboxctl.test", "sandboxctl.supervisor"} {
		if labels[k] == "" {
			t.Errorf("sandbox lacks label %s (labels %v)", k, labels)
		}
	}

	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo made-in-sandbox > /workspace/out.txt && id -u"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Details["status"] != "completed" || res.Details["exitCode"] != 0 || strings.TrimSpace(text(res)) == "0" {
		t.Fatalf("exec: %v / %q (want completed, exit 0, not root)", res.Details, text(res))
	}
	rc, err := sb.CopyFileFromContainer(ctx, "/workspace/out.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(rc)
	rc.Close()
	if string(out) != "made-in-sandbox\n" {
		t.Fatalf("copied out %q", out)
	}

	if err := sb.CopyToContainer(ctx, []byte("from the test\n"), "/workspace/in.txt", 0o640); err != nil {
		t.Fatal(err)
	}
	res, err = sb.Exec(ctx, sandboxctl.ExecParams{Command: "cat /workspace/in.txt && stat -c %a /workspace/in.txt && echo more >> /workspace/in.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Details["exitCode"] != 0 || !strings.Contains(text(res), "from the test\n640") {
		t.Fatalf("the copied-in file in the sandbox: %v / %q", res.Details, text(res))
	}

	// A background session, polled then killed through Process.
	res, err = sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo started; sleep 300", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Details["sessionId"].(string)
	if res.Details["status"] != "running" || id == "" {
		t.Fatalf("background exec: %v", res.Details)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err = sb.Process(ctx, sandboxctl.ProcessParams{Action: "log", SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text(res), "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output of the background session: %q", text(res))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := sb.Process(ctx, sandboxctl.ProcessParams{Action: "kill", SessionID: id}); err != nil {
		t.Fatal(err)
	}
	res, err = sb.Process(ctx, sandboxctl.ProcessParams{Action: "poll", SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Details["status"]; st == "running" {
		t.Fatalf("after kill the session is still %v", st)
	}

	ex, err := sb.Explain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ex.Name, "sbxtc-"+runID+"-") || ex.ScopeKey != "agent:alice" || !strings.HasPrefix(ex.Recreate, "no") {
		t.Fatalf("explain: %+v", ex)
	}

	terminated = true
	if err := sb.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if left := runContainers(t, cli, runID); len(left) != 0 {
		t.Fatalf("containers left after Terminate: %v", left)
	}
}

// TestInProcessBadOptions: bad options are refused by name before anything
// starts.
func TestInProcessBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]sandboxctl.Option{
		"host":   sandboxctl.WithHost("node"),
		"label":  sandboxctl.WithLabels(map[string]string{"sandboxctl.agentId": "mallory"}),
		"config": sandboxctl.WithConfigYAML([]byte("exec: [")),
	} {
		if _, err := inprocess.Run(ctx, opt); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming %s", name, err, name)
		}
	}
	// A config key this sandboxctl does not know is named with its line.
	_, err := inprocess.Run(ctx, sandboxctl.WithConfigYAML([]byte("exec:\n  hots: gateway\n")))
	if err == nil || !strings.Contains(err.Error(), "exec.hots") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestInProcessGateway runs on the gateway host (this machine) with
// security full, and copies a file through the local file system.
func TestInProcessGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := inprocess.Run(ctx, sandboxctl.WithHost("gateway"), sandboxctl.WithTB(t),
		sandboxctl.WithConfigYAML([]byte("exec:\n  security: full\n  ask: \"off\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := sb.CopyToContainer(ctx, []byte("x"), dir+"/in", 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: fmt.Sprintf("cat %s/in > %s/out; echo $$", dir, dir)})
	if err != nil || res.Details["exitCode"] != 0 {
		t.Fatalf("exec: %v %v", err, res.Details)
	}
	rc, err := sb.CopyFileFromContainer(ctx, dir+"/out")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "x" {
		t.Fatalf("copied out %q", b)
	}
}
