package main_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestFaultUploadStreamsAndChangesNothingUnlessComplete: the daemon
// streams an upload into the sandbox as it arrives (the file tool's
// .sandboxctl-upload-* temporary shows up in the workspace while the body
// is still being sent), yet an upload cut off mid-stream (tar or raw), a
// tar without its end marker, or one past the size limit, changes nothing
// in the sandbox — the target directory listed through the Engine is as it
// was — and leaves no temporary file.
func TestFaultUploadStreamsAndChangesNothingUnlessComplete(t *testing.T) {
	e, alice, _ := filesEnv(t)
	const limit = 4 << 20
	base := serveFiles(t, e, "--files-max-bytes", fmt.Sprint(limit))
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", alice) })
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "mkdir -p /workspace/in && echo keep > /workspace/in/old"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	docker := dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	list, err := docker.ContainerList(t.Context(), client.ContainerListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var container string
	for _, c := range list.Items {
		for _, n := range c.Names {
			if strings.Contains(n, alice) {
				container = c.ID
			}
		}
	}
	if container == "" {
		t.Fatalf("no container of %s", alice)
	}
	// engineList is /workspace/in as the Engine's archive API sees it:
	// every entry's name, type, size and, for files, content digest.
	engineList := func() []string {
		res, err := docker.CopyFromContainer(t.Context(), container, client.CopyFromContainerOptions{SourcePath: "/workspace/in"})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Content.Close()
		var out []string
		tr := tar.NewReader(res.Content)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			out = append(out, fmt.Sprintf("%s %c %d %q", hdr.Name, hdr.Typeflag, hdr.Size, b))
		}
	}
	ws := filepath.Join(e.state, "ws")
	temps := func() []string {
		var out []string
		_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".sandboxctl-upload-") {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	before := engineList()
	if len(before) != 2 || !strings.Contains(before[1], `"keep\n"`) {
		t.Fatalf("the Engine lists %q", before)
	}
	settled := func(t *testing.T) {
		t.Helper()
		// The file tool removes its temporaries when it is ended: poll.
		deadline := time.Now().Add(60 * time.Second)
		for len(temps()) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if left := temps(); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
		if after := engineList(); !slices.Equal(after, before) {
			t.Errorf("the sandbox changed:\nbefore %q\nafter  %q", before, after)
		}
	}

	// An archive of a complete 1 MiB file and the start of a 3 MiB one.
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for _, f := range []struct {
		name string
		size int
	}{{"old", 1 << 20}, {"big", 3 << 20}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Size: int64(f.size), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(bytes.Repeat([]byte("z"), f.size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	whole := archive.Bytes()

	// cutOff sends the head of body under a Content-Length of the whole,
	// waits until the sandbox holds a temporary file (the upload streams),
	// then breaks the connection.
	cutOff := func(t *testing.T, path, contentType string, body []byte, head int) {
		u, _ := url.Parse(base)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "PUT /v1/files?agent=%s&path=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			alice, path, filesToolToken, contentType, len(body))
		if _, err := conn.Write(body[:head]); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for len(temps()) == 0 {
			if time.Now().After(deadline) {
				_ = conn.SetReadDeadline(time.Now().Add(time.Second))
				answer, _ := io.ReadAll(conn)
				t.Fatalf("answer %q; no temporary file in the sandbox after %d of %d bytes: the upload does not stream", answer, head, len(body))
			}
			time.Sleep(20 * time.Millisecond)
		}
		conn.Close()
		settled(t)
	}
	t.Run("tar cut off mid-stream", func(t *testing.T) {
		cutOff(t, "/workspace/in", api.ContentTypeTar, whole, len(whole)-(2<<20))
	})
	t.Run("raw cut off mid-stream", func(t *testing.T) {
		cutOff(t, "/workspace/in/old", "application/octet-stream", whole[:3<<20], 3<<19)
	})
	t.Run("tar without its end marker", func(t *testing.T) {
		code, b := filesCall(t, base, filesToolToken, "PUT", "/v1/files?agent="+alice+"&path=/workspace/in", api.ContentTypeTar, whole[:len(whole)-1024])
		if code != http.StatusBadRequest || !strings.Contains(string(b), "end marker") {
			t.Errorf("answer %d %s, want 400 naming the end marker", code, b)
		}
		settled(t)
	})
	over := bytes.Repeat([]byte("y"), limit+1)
	for _, tc := range []struct{ name, path, contentType string }{
		{"raw past the limit", "/workspace/in/old", ""},
		{"tar past the limit", "/workspace/in", api.ContentTypeTar},
	} {
		t.Run(tc.name+" chunked", func(t *testing.T) {
			body := over
			if tc.contentType != "" {
				var b bytes.Buffer
				tw := tar.NewWriter(&b)
				for i := range 5 {
					if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprint("f", i), Size: 1 << 20, Mode: 0o644}); err != nil {
						t.Fatal(err)
					}
					if _, err := tw.Write(over[:1<<20]); err != nil {
						t.Fatal(err)
					}
				}
				_ = tw.Close()
				body = b.Bytes()
			}
			req, err := http.NewRequestWithContext(t.Context(), "PUT", base+"/v1/files?agent="+alice+"&path="+tc.path, io.MultiReader(bytes.NewReader(body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+filesToolToken)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), fmt.Sprintf("limit of %d bytes", limit)) {
				t.Errorf("answer %d %s, want 413 naming the limit", resp.StatusCode, b)
			}
			settled(t)
		})
	}
	// A complete upload still lands.
	if code, b := filesCall(t, base, filesToolToken, "PUT", "/v1/files?agent="+alice+"&path=/workspace/in", api.ContentTypeTar, whole); code != http.StatusOK {
		t.Fatalf("complete upload: %d %s", code, b)
	}
	if got := engineList(); len(got) != 3 || !strings.HasPrefix(got[1], "in/big 0 3145728") && !strings.HasPrefix(got[2], "in/big 0 3145728") {
		t.Fatalf("after a complete upload the Engine lists %d entries", len(got))
	}
}
