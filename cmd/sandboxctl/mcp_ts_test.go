package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeClientDir holds the TypeScript SDK client (package.json, lockfile).
var nodeClientDir = filepath.Join("..", "..", "internal", "mcpserver", "testdata", "node")

// npmCI installs the locked version of pkg (an npm package name) into
// dir/node_modules with `npm ci`, unless that version is already there.
// Node and npm come from scripts/toolchain.sh; their absence fails the
// test.
func npmCI(t *testing.T, dir, pkg string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run scripts/toolchain.sh (make toolchain)", tool)
		}
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil || json.Unmarshal(raw, &lock) != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	want := lock.Packages["node_modules/"+pkg].Version
	var have struct {
		Version string `json:"version"`
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json")); err == nil {
		_ = json.Unmarshal(raw, &have)
	}
	if want != "" && have.Version == want {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

type tsResult struct {
	Tools map[string]struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Enum        []any  `json:"enum"`
		} `json:"properties"`
	} `json:"tools"`
	Calls map[string]struct {
		IsError    bool           `json:"isError"`
		Text       string         `json:"text"`
		Structured map[string]any `json:"structured"`
	} `json:"calls"`
}

func runTSClient(t *testing.T, file string, args ...string) tsResult {
	t.Helper()
	cmd := exec.Command("node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = nodeClientDir
	cmd.Env = append(os.Environ(), "MCP_TEST_FILE="+file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node client %v: %v\nstderr:\n%s", args[0], err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("node client %v did not finish\nstderr:\n%s", args[0], stderr.String())
	}
	var res tsResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node client output: %v: %s", err, stdout.String())
	}
	return res
}

// checkTS checks what the TypeScript client saw: the tools and their
// schemas (agentId advertised only when unpinned), exec's result, the file
// tools acting in the agent's sandbox, and the enum refusing a bad host.
func checkTS(t *testing.T, res tsResult, pinned bool, file string) {
	t.Helper()
	for _, name := range []string{"exec", "process", "read_file", "write_file", "list_files"} {
		tool, ok := res.Tools[name]
		if !ok {
			t.Fatalf("tool %s not listed: %v", name, res.Tools)
		}
		if _, has := tool.Properties["agentId"]; has == pinned {
			t.Errorf("pinned=%v: %s advertises agentId=%v", pinned, name, has)
		}
		for field, p := range tool.Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description", name, field)
			}
		}
	}
	ex := res.Tools["exec"].Properties
	// Pinned, the schema offers only what the configuration lets the agent
	// use: its configured host (sandbox), and no elevated (not enabled).
	wantHosts := 3
	if pinned {
		wantHosts = 1
		if _, has := ex["elevated"]; has {
			t.Errorf("pinned exec advertises elevated, which the configuration does not enable")
		}
	}
	if len(ex["host"].Enum) != wantHosts || len(ex["security"].Enum) != 3 || len(ex["ask"].Enum) != 3 || ex["yieldMs"].Type != "integer" {
		t.Errorf("exec schema: host %v security %v ask %v yieldMs %v", ex["host"].Enum, ex["security"].Enum, ex["ask"].Enum, ex["yieldMs"].Type)
	}
	if len(res.Tools["process"].Properties["action"].Enum) != 11 {
		t.Errorf("process action enum: %v", res.Tools["process"].Properties["action"].Enum)
	}
	c := res.Calls
	if e := c["exec"]; !strings.Contains(e.Text, "from-ts") || e.Structured["exitCode"] != float64(3) {
		t.Errorf("exec: %+v", e)
	}
	if !c["badHost"].IsError {
		t.Errorf("host elsewhere accepted: %+v", c["badHost"])
	}
	if c["write"].IsError || c["read"].Text != "written by ts\n" {
		t.Errorf("write/read: %+v %+v", c["write"], c["read"])
	}
	if !strings.Contains(c["list"].Text, filepath.Base(file)) {
		t.Errorf("list: %+v", c["list"])
	}
	if r := c["readMissing"]; !r.IsError || !strings.Contains(r.Text, "no such file") {
		t.Errorf("read of a missing file: %+v", r)
	}
}

// TestMCPTypeScriptClient drives the MCP server with the official
// TypeScript SDK (@modelcontextprotocol/sdk from npm) over stdio
// (`sandboxctl mcp --agent`) and over the daemon's streamable HTTP
// endpoint /mcp, with the tool token (unpinned) and an agent token
// (pinned: its files land in that agent's sandbox).
func TestMCPTypeScriptClient(t *testing.T) {
	npmCI(t, nodeClientDir, "@modelcontextprotocol/sdk")
	e, alice, bob := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", bob)
	})
	bin, err := filepath.Abs(binary)
	if err != nil {
		t.Fatal(err)
	}

	// stdio, pinned to bob by the command line.
	res := runTSClient(t, "/workspace/stdio.txt", "stdio", bin, "--state", e.state, "--config", e.config, "mcp", "--agent", bob)
	checkTS(t, res, true, "/workspace/stdio.txt")
	if r := e.run(t, "exec", "--agent", bob, "--host", "sandbox", "--", "cat /workspace/stdio.txt"); r.stdout != "written by ts\n" {
		t.Fatalf("stdio write_file did not land in bob's sandbox: %+v", r)
	}

	// Streamable HTTP with alice's agent token: pinned to alice.
	res = runTSClient(t, "/tmp/http.txt", "http", base+"/mcp", filesAliceToken)
	checkTS(t, res, true, "/tmp/http.txt")
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "cat /tmp/http.txt"); r.stdout != "written by ts\n" {
		t.Fatalf("http write_file did not land in alice's sandbox: %+v", r)
	}

	// No token: refused before MCP.
	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp without a token: %d", resp.StatusCode)
	}
}
