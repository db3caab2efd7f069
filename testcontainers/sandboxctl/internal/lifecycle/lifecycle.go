// Package lifecycle is the check both modes of package sandboxctl pass.
package lifecycle

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
)

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

// Options are what Check runs a sandbox with (the launcher comes from the
// caller): the test image, agent "alice", the label sandboxctl.test.
func Options(image string) []sandboxctl.Option {
	return []sandboxctl.Option{sandboxctl.WithImage(image), sandboxctl.WithAgentID("alice"),
		sandboxctl.WithLabels(map[string]string{"sandboxctl.test": "testcontainers"})}
}

// Check runs a command in the sandbox of sb (started with Options), copies
// files in and out through the Engine, polls and kills a background
// session, explains the sandbox, and checks that Terminate leaves no
// container of the run behind while its sandbox carried the testcontainers
// labels. extra are the run's containers besides the sandbox (the daemon).
func Check(ctx context.Context, t *testing.T, cli *client.Client, sb *sandboxctl.Sandbox, extra int) {
	t.Helper()
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
	if len(list.Items) != 1+extra {
		t.Fatalf("containers of the run after Run: %d, want the sandbox and %d more", len(list.Items), extra)
	}
	var labels map[string]string
	for _, c := range list.Items {
		if c.Labels["sandboxctl.managed"] != "" {
			labels = c.Labels
		}
	}
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
	if res.Details.Status != "completed" || !ExitedZero(res) || strings.TrimSpace(text(res)) == "0" {
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
	if !ExitedZero(res) || !strings.Contains(text(res), "from the test\n640") {
		t.Fatalf("the copied-in file in the sandbox: %v / %q", res.Details, text(res))
	}

	// A background session, polled then killed through Process.
	res, err = sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo started; sleep 300", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	if res.Details.Status != "running" || id == "" {
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
	if st := res.Details.Status; st == "running" {
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

// ExitedZero reports whether res is a run that exited with code 0.
func ExitedZero(res sandboxctl.Result) bool {
	exit, ok := res.Details.Exit()
	return ok && exit.Reason == api.ExitExited && exit.Code == 0
}
