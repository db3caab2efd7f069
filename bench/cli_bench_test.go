package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
)

// BenchmarkCLIProcess measures what the sandboxctl process itself costs
// in `sandboxctl exec -- true`, without Docker: a stand-in daemon on the
// state directory's socket answers the streamed exec at once with the
// frames a real daemon sends for `true` (start, exit, result). It prints
// the time from the CLI's spawn to its request, from the answer to the
// CLI's exit, and a static Go program that only exits (the floor of any
// Go CLI), interleaved. BenchmarkSupervisor's CLI figure is this plus the
// daemon's answer.
//
//	go test -run '^$' -bench CLIProcess -benchtime 1x ./bench/
func BenchmarkCLIProcess(b *testing.B) {
	if b.N > 1 {
		b.Skip("one pass is the measurement; use -benchtime 1x")
	}
	dir := b.TempDir()
	bins, err := testbuild.Build(dir, "sandboxctl")
	if err != nil {
		b.Fatal(err)
	}
	cli := installCopy(b, bins[0])
	floor := installCopy(b, buildExitOnly(b, dir))
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		b.Fatal(err)
	}
	conf := filepath.Join(dir, "sandboxctl.yaml")
	yaml := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n",
		filepath.Join(dir, "ws"), benchImage)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("unix", api.SocketPath(state))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	answer := execAnswer(b)

	cliArgs := []string{"--state", state, "--config", conf, "exec", "--agent", "bench", "--security", "full", "--ask", "off", "--", "true"}
	// one runs the CLI against the stand-in: spawn → request read, and
	// answer written → exit.
	one := func() (toRequest, toExit time.Duration) {
		cmd := exec.Command(cli, cliArgs...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		conn, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		line, body := readRequest(b, conn)
		t1 := time.Now()
		if line != "POST /v1/tools/exec HTTP/1.0" || !bytes.Contains(body, []byte(`"stream":true`)) || !bytes.Contains(body, []byte(`"raw":true`)) {
			b.Fatalf("the CLI sent %q %s, not one streamed raw exec", line, body)
		}
		if _, err := conn.Write(answer); err != nil {
			b.Fatal(err)
		}
		_ = conn.Close()
		t2 := time.Now()
		if err := cmd.Wait(); err != nil {
			b.Fatalf("sandboxctl exec: %v: %s", err, stderr.Bytes())
		}
		return t1.Sub(t0), time.Since(t2)
	}
	for range 5 {
		one()
	}
	var toReq, toExit, total, bare []time.Duration
	for range 60 {
		r, e := one()
		toReq, toExit, total = append(toReq, r), append(toExit, e), append(total, r+e)
		time.Sleep(20 * time.Millisecond)
		bare = append(bare, sample(b, 1, func() error { return exec.Command(floor).Run() })...)
		time.Sleep(20 * time.Millisecond)
	}
	tab := &table{}
	tab.add("sandboxctl exec: spawn → request sent", ms(median(toReq)), "", "")
	tab.add("sandboxctl exec: answer → process exit", ms(median(toExit)), "", "")
	tab.add("sandboxctl exec: the process's own time", ms(median(total)), "a Go program that only exits: "+ms(median(bare)), "")
	tab.print(os.Stdout)
	b.ReportMetric(float64(median(total).Microseconds())/1000, "cli-own-ms")
}

// execAnswer is the daemon's answer to a streamed raw exec of `true` (as
// internal/daemon writes it: HTTP/1.0, then JSON frames of kind 'j').
func execAnswer(b *testing.B) []byte {
	zero := 0
	frames := []api.StreamFrame{
		{Type: api.FrameStart, SessionID: "bench-session", PID: 30},
		{Type: api.FrameExit, SessionID: "bench-session", Status: api.StatusCompleted, ExitCode: &zero},
		{Type: api.FrameResult, Result: &api.Result{
			Content: []api.Content{{Type: "text", Text: "(no output)"}},
			Details: api.Details{Status: api.StatusCompleted, ExitCode: api.Code(0), Host: "sandbox", Cwd: "/workspace", DurationMs: new(int64(1))},
		}},
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.0 200 OK\r\nContent-Type: %s\r\nCache-Control: no-store\r\n\r\n", api.ContentTypeFrames)
	for _, f := range frames {
		js, err := json.Marshal(f)
		if err != nil {
			b.Fatal(err)
		}
		var hdr [5]byte
		hdr[0] = api.FrameKindJSON
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(js)))
		out.Write(hdr[:])
		out.Write(js)
	}
	return out.Bytes()
}

// readRequest reads one HTTP/1.0 request: its request line and body.
func readRequest(b *testing.B, conn net.Conn) (string, []byte) {
	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		b.Fatal(err)
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.Atoi(hdr.Get("Content-Length"))
	if err != nil {
		b.Fatalf("Content-Length %q: %v", hdr.Get("Content-Length"), err)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		b.Fatal(err)
	}
	return line, body
}

// installCopy copies the binary at path beside it, as install(1), cp or
// a package manager writes a file, and returns the copy's
// path. The linker writes its output through a memory mapping, which
// leaves the file in the page cache in small pages: each run of a binary
// just linked takes more page faults to map its code (0.4 to 0.9 ms more
// per sandboxctl run here) than the same bytes installed.
func installCopy(b *testing.B, path string) string {
	out := path + ".installed"
	src, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
	return out
}

// buildExitOnly builds a static Go program that only exits, as the
// commands are built (testbuild), and returns its path.
func buildExitOnly(b *testing.B, dir string) string {
	src := filepath.Join(dir, "exitonly")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module exitonly\n\ngo 1.24\n",
		"main.go": "package main\n\nimport \"os\"\n\nfunc main() { os.Exit(0) }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(dir, "exitonly.bin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the exit-only program: %v\n%s", err, strings.TrimSpace(string(msg)))
	}
	return out
}
