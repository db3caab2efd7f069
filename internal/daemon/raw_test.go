package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// rawOutput is what a raw stream delivered.
type rawOutput struct {
	stdout, stderr []byte
	next           int64            // the offset to go on from
	exit           *api.StreamFrame // nil: the stream ended first
	sessionID      string
}

// readRaw reads a raw stream to its exit frame, or to the result frame of
// a streamed exec whose yield window ended first: stdout and stderr apart,
// checking each frame starts where the last ended; no frame may say
// output was dropped.
func readRaw(t *testing.T, fs *apiclient.FrameStream, o *rawOutput) {
	t.Helper()
	for {
		f := nextFrame(t, fs)
		switch f.Type {
		case api.FrameStart:
			o.sessionID = f.SessionID
		case api.FrameStatus:
		case api.FrameStdout, api.FrameStderr:
			if f.Offset == nil || *f.Offset != o.next || f.Data != "" {
				t.Fatalf("frame at %v, want %d (data %q)", f.Offset, o.next, f.Data)
			}
			o.next += int64(len(f.Bytes))
			if f.Type == api.FrameStdout {
				o.stdout = append(o.stdout, f.Bytes...)
			} else {
				o.stderr = append(o.stderr, f.Bytes...)
			}
		case api.FrameExit:
			o.exit = &f
			return
		case api.FrameResult:
			return
		default:
			t.Fatalf("unexpected frame %+v", f)
		}
	}
}

// TestFaultRawStreamByteExact (issue 31): random bytes (NUL, ESC, invalid
// UTF-8) on stdout and stderr arrive exactly through a raw streamed exec
// and a raw session stream, at 1 KB and 100 MB; raw stdin is exact too.
func TestFaultRawStreamByteExact(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for _, n := range []int{1000, 100 << 20} {
		data := make([]byte, n)
		_, _ = rand.Read(data)
		src := filepath.Join(t.TempDir(), "src")
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fs, err := r.client.ExecStream(ctx, api.ExecParams{Command: fmt.Sprintf("cat %s; cat %s >&2", src, src), Raw: true})
		if err != nil {
			t.Fatal(err)
		}
		var o rawOutput
		readRaw(t, fs, &o)
		_ = fs.Close()
		if o.exit == nil {
			// The yield window ended first: the session goes on in the
			// background; follow it raw from where the stream stopped.
			fs, err := r.client.SessionStream(ctx, "", "", o.sessionID, o.next, true)
			if err != nil {
				t.Fatal(err)
			}
			readRaw(t, fs, &o)
			_ = fs.Close()
		}
		if !bytes.Equal(o.stdout, data) || !bytes.Equal(o.stderr, data) || o.exit == nil || o.exit.ExitCode == nil || *o.exit.ExitCode != 0 {
			t.Errorf("%d bytes, streamed exec: stdout %d bytes equal %v, stderr %d bytes equal %v, exit %+v",
				n, len(o.stdout), bytes.Equal(o.stdout, data), len(o.stderr), bytes.Equal(o.stderr, data), o.exit)
		}
		// A background session followed raw, its stdin written raw.
		dst := filepath.Join(t.TempDir(), "dst")
		res, err := r.client.Exec(ctx, api.ExecParams{Command: "cat > " + dst + "; cat " + dst, Background: true, Raw: true})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Details.SessionID
		for off := 0; off < n; off += 4 << 20 {
			last := off+4<<20 >= n
			if _, err := r.client.WriteStdin(ctx, "", "", id, data[off:min(n, off+4<<20)], last); err != nil {
				t.Fatal(err)
			}
		}
		fs, err = r.client.SessionStream(ctx, "", "", id, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		var so rawOutput
		readRaw(t, fs, &so)
		_ = fs.Close()
		if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) || !bytes.Equal(so.stdout, data) {
			t.Errorf("%d bytes, raw stdin and session stream: file equal %v (%v), stream %d bytes equal %v", n, bytes.Equal(got, data), err, len(so.stdout), bytes.Equal(so.stdout, data))
		}
	}
	// A session started without raw has no raw stream.
	res, err := r.client.Exec(ctx, api.ExecParams{Command: "true", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	var apiErr *apiclient.APIError
	if _, err := r.client.SessionStream(ctx, "", "", id, 0, true); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("raw stream of a session without raw output: %v, want 400", err)
	}
	if _, err := r.client.Exec(ctx, api.ExecParams{Command: "true", Raw: true}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Field != "raw" {
		t.Errorf("raw without stream or background: %v, want 400 on raw", err)
	}
}

// TestFaultRawStreamReaderHoldsCommand (issue 31): while a raw reader
// does not read, the command is held back (it has not finished writing
// 64 MiB, and the daemon's heap stays far below it); when the reader
// resumes it gets every byte, with no dropped frame.
func TestFaultRawStreamReaderHoldsCommand(t *testing.T) {
	r, _ := startGatewayDaemon(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const total = 64 << 20
	done := filepath.Join(t.TempDir(), "done")
	fs, err := r.client.ExecStream(ctx, api.ExecParams{Command: fmt.Sprintf("head -c %d /dev/zero; touch %s", total, done), Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	var o rawOutput
	if f := nextFrame(t, fs); f.Type != api.FrameStart {
		t.Fatalf("first frame %+v", f)
	} else {
		o.sessionID = f.SessionID
	}
	// Read nothing while the command could have written everything many
	// times over; it must be held back, not finish into a buffer.
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base+total/4 {
			t.Fatalf("heap grew by %d MiB while the reader waits", (ms.HeapAlloc-base)>>20)
		}
	}
	if _, err := os.Stat(done); err == nil {
		t.Fatal("the command finished writing 64 MiB while its raw reader read nothing: the output went somewhere")
	}
	readRaw(t, fs, &o)
	if o.exit == nil {
		fs, err := r.client.SessionStream(ctx, "", "", o.sessionID, o.next, true)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		readRaw(t, fs, &o)
	}
	h := sha256.Sum256(make([]byte, total))
	if got := sha256.Sum256(o.stdout); got != h || o.exit == nil || o.exit.ExitCode == nil || *o.exit.ExitCode != 0 {
		t.Errorf("after resuming: %d bytes (want %d all zero), exit %+v", len(o.stdout), total, o.exit)
	}
}
