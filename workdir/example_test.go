package workdir_test

import (
	"fmt"

	"github.com/sandboxctl/sandboxctl/workdir"
)

func ExampleResolveSandbox() {
	for _, req := range []string{"", "src", "/workspace/a/../b", "/workspace/../etc", "/etc"} {
		p, warn := workdir.ResolveSandbox("/nonexistent/agent-ws", workdir.AccessRW, req)
		if warn != "" {
			p += " (" + warn + ")"
		}
		fmt.Printf("%q -> %s\n", req, p)
	}
	// Output:
	// "" -> /workspace
	// "src" -> /workspace/src
	// "/workspace/a/../b" -> /workspace/b
	// "/workspace/../etc" -> /workspace (workdir "/workspace/../etc" escapes the workspace /workspace: `..` leaves the workspace; using /workspace)
	// "/etc" -> /workspace (workdir "/etc" escapes the workspace /nonexistent/agent-ws: not inside the agent workspace nor under /workspace; using /workspace)
}

func ExampleToSandbox() {
	p, err := workdir.ToSandbox("/nonexistent/agent-ws", workdir.AccessRO, "/nonexistent/agent-ws/src/pkg")
	fmt.Println(p, err)
	// Output: /agent/src/pkg <nil>
}
