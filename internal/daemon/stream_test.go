package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// nextFrame reads one frame or fails the test.
func nextFrame(t *testing.T, fs *apiclient.FrameStream) api.StreamFrame {
	t.Helper()
	f, err := fs.Next()
	if err != nil {
		t.Fatalf("stream ended early: %v", err)
	}
	return f
}

// TestRealExecStreamLive: a streamed exec delivers each line while the
// command still runs (the command waits for a file the test creates only
// after it saw the first line), stdout and stderr apart, an exit frame with
// the code, and last exactly the result the plain call returns.
func TestRealExecStreamLive(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	m1, m2 := filepath.Join(dir, "1"), filepath.Join(dir, "2")
	waitFor := func(m string) string { return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", m) }
	cmd := fmt.Sprintf("echo line 1; %s; echo line 2 >&2; %s; echo line 3; exit 9", waitFor(m1), waitFor(m2))
	fs, err := r.client.ExecStream(ctx, api.ExecParams{Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	start := nextFrame(t, fs)
	if start.Type != api.FrameStart || start.SessionID == "" || start.PID <= 0 {
		t.Fatalf("first frame %+v, want start with session id and pid", start)
	}
	// Each line arrives while the command is blocked until the test saw it.
	for _, want := range []struct {
		typ, data string
		offset    int64
		release   string
	}{{"stdout", "line 1\n", 0, m1}, {"stderr", "line 2\n", 7, m2}} {
		f := nextFrame(t, fs)
		if f.Type != want.typ || f.Data != want.data || f.Offset == nil || *f.Offset != want.offset {
			t.Fatalf("frame %+v, want %s %q at %d", f, want.typ, want.data, want.offset)
		}
		if err := os.WriteFile(want.release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out string
	var exit, result *api.StreamFrame
	for result == nil {
		f := nextFrame(t, fs)
		switch f.Type {
		case api.FrameStdout:
			out += f.Data
		case api.FrameExit:
			exit = &f
		case api.FrameResult:
			result = &f
		default:
			t.Fatalf("unexpected frame %+v", f)
		}
	}
	if out != "line 3\n" {
		t.Errorf("last output %q, want \"line 3\\n\"", out)
	}
	if exit == nil || exit.Status != api.StatusCompleted || exit.ExitCode == nil || *exit.ExitCode != 9 {
		t.Errorf("exit frame %+v, want completed with code 9", exit)
	}
	if _, err := fs.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the result: %v, want the end of the stream", err)
	}
	// The result is the plain call's: same fields, same text.
	plain, err := r.client.Exec(ctx, api.ExecParams{Command: "echo line 1; echo line 2; echo line 3; exit 9"})
	if err != nil {
		t.Fatal(err)
	}
	res := result.Result
	got, want := wireDetails(t, res.Details), wireDetails(t, plain.Details)
	if keys(got) != keys(want) {
		t.Errorf("result details keys %s, plain call %s", keys(got), keys(want))
	}
	for _, k := range []string{"status", "exitCode", "aggregated", "cwd"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("result details[%s] = %v, plain call %v", k, got[k], want[k])
		}
	}
	if len(res.Content) != 1 || res.Content[0].Text != plain.Content[0].Text {
		t.Errorf("result content %+v, plain call %+v", res.Content, plain.Content)
	}
}

// wireDetails is details' JSON object, as a client sees it.
func wireDetails(t *testing.T, d api.Details) map[string]any {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// TestRealExecStreamBadInput: bad input is the same 400 as without stream.
func TestRealExecStreamBadInput(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	_, err := r.client.ExecStream(t.Context(), api.ExecParams{Command: " "})
	var apiErr *apiclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "Provide a command to start.") {
		t.Errorf("empty command: %v", err)
	}
}

// TestRealSessionStreamFromOffset: a background session is followed from
// any offset to its exit frame, in its scope only.
func TestRealSessionStreamFromOffset(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := r.client.Exec(ctx, api.ExecParams{Command: "printf abc; printf def; exit 4", Background: true, AgentID: "a1", SessionKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	// read follows the session from offset from: its output, checking
	// that each frame starts where the previous one ended.
	read := func(from int64) (string, api.StreamFrame) {
		t.Helper()
		fs, err := r.client.SessionStream(ctx, "a1", "k", id, from, false)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if f := nextFrame(t, fs); f.Type != api.FrameStart || f.SessionID != id {
			t.Fatalf("first frame %+v", f)
		}
		var b strings.Builder
		next := from
		for {
			f := nextFrame(t, fs)
			switch f.Type {
			case api.FrameStdout:
				if *f.Offset != next {
					t.Errorf("frame at %d, want %d", *f.Offset, next)
				}
				next = *f.Offset + int64(len(f.Data))
				b.WriteString(f.Data)
			case api.FrameExit:
				return b.String(), f
			default:
				t.Errorf("unexpected frame %+v", f)
			}
		}
	}
	all, exit := read(0)
	if all != "abcdef" {
		t.Errorf("from 0: %q", all)
	}
	if exit.ExitCode == nil || *exit.ExitCode != 4 {
		t.Errorf("exit frame %+v, want code 4", exit)
	}
	if tail, _ := read(3); tail != "def" {
		t.Errorf("from 3: %q", tail)
	}
	if past, _ := read(100); past != "" {
		t.Errorf("from 100: %q", past)
	}
	for _, scope := range [][2]string{{"a2", "k"}, {"a1", ""}, {"", ""}} {
		_, err := r.client.SessionStream(ctx, scope[0], scope[1], id, 0, false)
		var apiErr *apiclient.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("scope %q: %v, want 404", scope, err)
		}
	}
	_, err = r.client.Call(ctx, "GET", "/v1/sessions/"+id+"/stream?agent=a1&sessionKey=k&from=-1", nil)
	var apiErr *apiclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("from=-1: %v, want 400", err)
	}
}

// TestRealSessionStreamSlowReader: a reader that stops reading while a
// session writes 64 MiB does not make the daemon hold that output: the
// heap stays far below it, and when the reader resumes it is told how much
// it lost and then gets the kept tail (at most the session's cap).
//
// The daemon's write deadline (Options.WriteStall) is far shorter here than
// the reader's stall: a stream is exempt from it, so the paused reader is
// not dropped.
func TestRealSessionStreamSlowReader(t *testing.T) {
	r, mgr := startGatewayDaemon(t, func(o *Options) { o.WriteStall = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const total = 64 << 20
	res, err := r.client.Exec(ctx, api.ExecParams{Command: fmt.Sprintf("sleep 0.5; head -c %d /dev/zero | tr '\\0' x", total), Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	fs, err := r.client.SessionStream(ctx, "", "", id, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if f := nextFrame(t, fs); f.Type != api.FrameStart {
		t.Fatalf("first frame %+v", f)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// Stall: read nothing until the command has ended.
	wait := 30000.0
	for {
		p, err := r.client.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: &wait})
		if err != nil {
			t.Fatal(err)
		}
		if p.Details.Status != api.StatusRunning {
			break
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use: %d before, %d after %d bytes of output (grew %d)", before.HeapInuse, after.HeapInuse, total, grew)
	if grew > 16<<20 {
		t.Errorf("heap grew by %d bytes while a reader stalled on %d bytes of output", grew, total)
	}
	var got, lost int64
	for {
		f := nextFrame(t, fs)
		switch f.Type {
		case api.FrameDropped:
			lost += f.Lost
		case api.FrameStdout:
			got += int64(len(f.Data))
		}
		if f.Type == api.FrameExit {
			break
		}
	}
	limit := int64(mgr.Limits().MaxOutputChars)
	t.Logf("after the stall: %d bytes delivered, %d reported lost (cap %d)", got, lost, limit)
	if lost == 0 || got+lost != total {
		t.Errorf("delivered %d + lost %d, want %d in all with a loss reported", got, lost, total)
	}
	// What was delivered is what the socket buffers held plus the kept tail.
	if got > limit+8<<20 {
		t.Errorf("delivered %d bytes after the stall: more than the cap %d plus socket buffers", got, limit)
	}
}
