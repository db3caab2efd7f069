package inprocess_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/inprocess"
)

// In the test process: a file copied in, a command that reads it.
func ExampleRun() {
	ctx := context.Background()
	sb, err := inprocess.Run(ctx, sandboxctl.WithImage("sandboxctl/testbb:1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Terminate(ctx)

	if err := sb.CopyToContainer(ctx, []byte("3 4\n"), "/workspace/in.txt", 0o644); err != nil {
		fmt.Println(err)
		return
	}
	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "read a b < /workspace/in.txt; echo $((a*b))"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(*res.Details.Aggregated)
	// Output: 12
}

// A background session: started, its output read with process log, then
// killed.
func ExampleRun_process() {
	ctx := context.Background()
	sb, err := inprocess.Run(ctx, sandboxctl.WithImage("sandboxctl/testbb:1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Terminate(ctx)

	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo serving; sleep 600", Background: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	id := res.Details.SessionID
	fmt.Println(res.Details.Status)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if res, err = sb.Process(ctx, sandboxctl.ProcessParams{Action: "log", SessionID: id}); err != nil || strings.Contains(res.Content[0].Text, "serving") {
			break
		}
	}
	fmt.Println(strings.TrimSpace(res.Content[0].Text))
	if _, err := sb.Process(ctx, sandboxctl.ProcessParams{Action: "kill", SessionID: id}); err != nil {
		fmt.Println(err)
		return
	}
	res, _ = sb.Process(ctx, sandboxctl.ProcessParams{Action: "poll", SessionID: id})
	fmt.Println(res.Details.Status)
	// Output:
	// running
	// serving
	// failed
}

// Explain tells the effective sandbox config of the scope and whether the
// next command would recreate the container.
func ExampleRun_explain() {
	ctx := context.Background()
	sb, err := inprocess.Run(ctx, sandboxctl.WithImage("sandboxctl/testbb:1"), sandboxctl.WithAgentID("alice"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Terminate(ctx)
	ex, err := sb.Explain(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ex.ScopeKey)
	fmt.Println(ex.Recreate)
	// Output:
	// agent:alice
	// no: the container matches the config in force
}
