package main_test

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// randomFile writes n random bytes to a new file and returns its path and
// its SHA-256.
func randomFile(t *testing.T, n int64) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("random-%d", n))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p, hex.EncodeToString(h.Sum(nil))
}

func fileSHA(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// runToFiles runs sandboxctl with stdin from the file in (or /dev/null)
// and stdout and stderr into files; it returns their paths and the exit
// code.
func (e *env) runToFiles(t *testing.T, in string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	dir := t.TempDir()
	stdout, stderr = filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	cmd := exec.Command(binary, append([]string{"--state", e.state, "--config", e.config}, args...)...)
	var files []*os.File
	open := func(p string, flag int) *os.File {
		f, err := os.OpenFile(p, flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		return f
	}
	if in != "" {
		cmd.Stdin = open(in, os.O_RDONLY)
	}
	cmd.Stdout = open(stdout, os.O_WRONLY|os.O_CREATE)
	cmd.Stderr = open(stderr, os.O_WRONLY|os.O_CREATE)
	err := cmd.Run()
	for _, f := range files {
		_ = f.Close()
	}
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, code
}

// TestFaultExecByteExact replays issue 31: random binary data (NUL, ESC,
// invalid UTF-8) through a waiting exec arrives byte for byte on stdout,
// on stderr, and from stdin, at 1 KB and 100 MB; and the 1000 NUL bytes
// of head -c 1000 /dev/zero are 1000 bytes, not 0.
func TestFaultExecByteExact(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "exec", "--", "head -c 1000 /dev/zero")
	if r.code != 0 || r.stdout != strings.Repeat("\x00", 1000) {
		t.Fatalf("head -c 1000 /dev/zero: exit %d, %d bytes on stdout; want 1000 NUL bytes", r.code, len(r.stdout))
	}
	for _, n := range []int64{1000, 100 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			src, sum := randomFile(t, n)
			out, errf, code := e.runToFiles(t, "", "exec", "--", "cat "+src)
			if got := fileSHA(t, out); code != 0 || got != sum {
				t.Errorf("stdout: exit %d, sha256 %s, want %s", code, got, sum)
			}
			if b, _ := os.ReadFile(errf); len(b) != 0 {
				t.Errorf("stderr of cat: %.200q", b)
			}
			out, errf, code = e.runToFiles(t, "", "exec", "--", "cat "+src+" >&2")
			if got := fileSHA(t, errf); code != 0 || got != sum {
				t.Errorf("stderr: exit %d, sha256 %s, want %s", code, got, sum)
			}
			if fi, _ := os.Stat(out); fi.Size() != 0 {
				t.Errorf("stdout of cat >&2: %d bytes", fi.Size())
			}
			dst := filepath.Join(t.TempDir(), "stdin-copy")
			_, errf, code = e.runToFiles(t, src, "exec", "--", "cat > "+dst)
			if got := fileSHA(t, dst); code != 0 || got != sum {
				b, _ := os.ReadFile(errf)
				t.Errorf("stdin: exit %d, sha256 %s, want %s; stderr %.300s", code, got, sum, b)
			}
		})
	}
}

// slowReader reads r in small pieces and lets each wait on a gate the
// test opens after it counted a number of reads: a reader slower than the
// command for a while, without timing.
type slowReader struct {
	r     io.Reader
	reads int
}

func (s *slowReader) Read(p []byte) (int, error) {
	s.reads++
	if s.reads < 2000 {
		// 1 KB a read while the command runs far ahead of it.
		p = p[:min(len(p), 1024)]
		time.Sleep(time.Millisecond)
	}
	return s.r.Read(p)
}

// TestFaultExecSlowReaderLosesNothing replays issue 31: seq 1 3000000 (~21
// MB) read slowly for a while loses nothing (no "bytes of output
// dropped" note): the command waits for its reader as under docker exec.
func TestFaultExecSlowReaderLosesNothing(t *testing.T) {
	e := newEnv(t)
	want := sha256.New()
	for i := 1; i <= 3000000; i++ {
		fmt.Fprintf(want, "%d\n", i)
	}
	cmd := exec.Command(binary, "--state", e.state, "--config", e.config, "exec", "--", "seq 1 3000000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	sr := &slowReader{r: pipe}
	if _, err := io.Copy(got, sr); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exec: %v; stderr %s", err, stderr.String())
	}
	if sr.reads < 2000 {
		t.Fatalf("only %d reads: the slow phase did not happen", sr.reads)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) || stderr.Len() != 0 {
		t.Errorf("output differs from seq's (stderr %q)", stderr.String())
	}
}

// tarSHA returns the name and content SHA-256 of the one file in a tar.
func tarSHA(t *testing.T, r io.Reader) (string, string) {
	t.Helper()
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, tr); err != nil {
		t.Fatal(err)
	}
	return hdr.Name, hex.EncodeToString(h.Sum(nil))
}

// TestFaultExecEdges replays issue 31's CLI edges: -it with a stdin that
// is not a terminal is refused with docker's message at once; a workdir
// that cannot be used is an error through --json too (nothing runs); and
// SIGHUP or SIGTERM of a waiting exec ends the remote command as Ctrl-C
// does.
func TestFaultExecEdges(t *testing.T) {
	e := newEnv(t)
	r := e.runIn(t, "hi\n", "exec", "-it", "--", "cat")
	if r.code != 1 || !strings.Contains(r.stderr, "the input device is not a TTY") {
		t.Errorf("echo hi | exec -it -- cat: exit %d, stderr %q", r.code, r.stderr)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{{"--json", "exec"}, {"exec", "--yield-ms", "1000"}, {"exec"}} {
		r := e.run(t, append(args, "-w", "/nonexistent-31", "--", "touch "+marker)...)
		if r.code == 0 || exists(marker) || !strings.Contains(r.stdout+r.stderr, "/nonexistent-31") {
			t.Errorf("%v with an unusable workdir: exit %d, ran %v, %q %q", args, r.code, exists(marker), r.stdout, r.stderr)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		pidFile := filepath.Join(t.TempDir(), "pid")
		s := e.start(t, nil, "exec", "--", fmt.Sprintf("echo $$ > %s; echo started; exec sleep 666", pidFile))
		if l := s.line(t); l != "started\n" {
			t.Fatalf("first line %q", l)
		}
		b, err := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			t.Fatalf("pid file: %q %v", b, err)
		}
		if err := s.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if _, code := s.wait(t); code == 0 {
			t.Errorf("%v: sandboxctl exited 0", sig)
		}
		if err := waitGone(pid, 20*time.Second); err != nil {
			t.Errorf("%v of sandboxctl left the command running: %v", sig, err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestFaultCpLargeFilesByteExact replays issue 31: a 70 MB file in a
// sandbox (over the old 64 MiB cap of the file tool) downloads whole, to a
// file and as a tar on stdout, and 1 KB and 100 MB of random bytes make
// the round trip up and down unchanged.
func TestFaultCpLargeFilesByteExact(t *testing.T) {
	e, alice, _ := filesEnv(t)
	serveFiles(t, e)
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", alice) })
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "head -c 73400320 /dev/urandom > /workspace/f && sha256sum /workspace/f"); r.code != 0 {
		t.Fatalf("make the file: %+v", r)
	} else {
		want, _, _ := strings.Cut(r.stdout, " ")
		dir := t.TempDir()
		if r := e.run(t, "cp", alice+":/workspace/f", dir); r.code != 0 {
			t.Fatalf("cp of 70 MB: exit %d, %s", r.code, r.stderr)
		}
		if got := fileSHA(t, filepath.Join(dir, "f")); got != want {
			t.Errorf("cp of 70 MB: sha256 %s, want %s", got, want)
		}
		out, _, code := e.runToFiles(t, "", "cp", alice+":/workspace/f", "-")
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		name, got := tarSHA(t, f)
		_ = f.Close()
		if code != 0 || name != "f" || got != want {
			t.Errorf("cp of 70 MB to -: exit %d, entry %q, sha256 %s, want %s", code, name, got, want)
		}
	}
	for _, n := range []int64{1000, 100 << 20} {
		src, sum := randomFile(t, n)
		if r := e.run(t, "cp", src, alice+":/workspace/up"); r.code != 0 {
			t.Fatalf("cp up %d bytes: %+v", n, r)
		}
		if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "sha256sum /workspace/up"); !strings.HasPrefix(r.stdout, sum+" ") {
			t.Errorf("cp up %d bytes: in the sandbox %q, want %s", n, r.stdout, sum)
		}
		dst := filepath.Join(t.TempDir(), "down")
		if r := e.run(t, "cp", alice+":/workspace/up", dst); r.code != 0 {
			t.Fatalf("cp down %d bytes: %+v", n, r)
		}
		if got := fileSHA(t, dst); got != sum {
			t.Errorf("cp down %d bytes: sha256 %s, want %s", n, got, sum)
		}
	}
}

// TestFaultExecStdinSlowReaderLosesNothing: a command that starts reading
// its stdin late (sleep, then cat) gets every byte of a 40 MB stdin; the
// CLI is held back meanwhile, as under docker exec -i, instead of the
// input beyond the supervisor's stdin queue being dropped.
func TestFaultExecStdinSlowReaderLosesNothing(t *testing.T) {
	e := newEnv(t)
	src, sum := randomFile(t, 40<<20)
	dst := filepath.Join(t.TempDir(), "stdin-copy")
	_, errf, code := e.runToFiles(t, src, "exec", "--", "sleep 3; cat > "+dst)
	if got := fileSHA(t, dst); code != 0 || got != sum {
		b, _ := os.ReadFile(errf)
		fi, _ := os.Stat(dst)
		size := int64(-1)
		if fi != nil {
			size = fi.Size()
		}
		t.Fatalf("stdin: exit %d, %d of %d bytes, sha256 %s, want %s; stderr %.300s", code, size, 40<<20, got, sum, b)
	}
}
