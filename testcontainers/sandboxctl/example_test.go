package sandboxctl_test

import (
	"context"
	"fmt"
	"io"

	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
)

// The daemon in a container: a command in a fresh sandbox, and the file it
// wrote copied out. In a test, pass sandboxctl.WithTB(t) instead of
// calling Terminate.
func ExampleRun() {
	ctx := context.Background()
	img, err := buildDaemonImage() // images/build.sh daemon, from this tree
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := sandboxctl.Run(ctx, img, sandboxctl.WithImage("sandboxctl/testbb:1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Terminate(ctx)

	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo hello from $(id -un) > /workspace/greeting; cat /workspace/greeting"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(*res.Details.Aggregated)

	rc, err := sb.CopyFileFromContainer(ctx, "/workspace/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	fmt.Printf("copied out: %s", b)
	// Output:
	// hello from sandbox
	// copied out: hello from sandbox
}
