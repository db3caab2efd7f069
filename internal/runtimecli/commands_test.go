package runtimecli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/internal/cli"
)

func TestCommandTree(t *testing.T) {
	// sandboxctld: the client commands and the runtime's own, each with
	// its actions (README, "Using it").
	c := &cli.CLI{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	root := cli.NewRootCommand(c, Commands(c)...)
	for _, path := range [][]string{
		{"exec"}, {"serve"}, {"serve", "stop"}, {"version"}, {"mcp"}, {"node", "run"}, {"node", "ls"},
		{"approvals", "list"}, {"approvals", "resolve"},
		{"process", "list"}, {"process", "poll"}, {"process", "log"}, {"process", "kill"},
		{"sandbox", "ls"}, {"sandbox", "create"}, {"sandbox", "rm"}, {"sandbox", "prune"},
		{"sandbox", "explain"}, {"sandbox", "shell"},
		{"sandbox", "snapshot"}, {"sandbox", "snapshots"}, {"sandbox", "rollback"}, {"sandbox", "fork"},
	} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] || cmd.RunE == nil {
			t.Errorf("sandboxctld %s: missing (%v)", strings.Join(path, " "), err)
		}
	}
	// The runtime commands are the ones the light sandboxctl forwards, with
	// the same one-line help.
	for _, rc := range cli.RuntimeCommands() {
		cmd, _, err := root.Find([]string{rc.Name})
		if err != nil || cmd.Short != rc.Short || cmd.DisableFlagParsing {
			t.Errorf("sandboxctld %s: %v, short %q", rc.Name, err, cmd.Short)
		}
	}
}
