package main_test

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestSecurityFilesOverLimitUploadLeavesNothing replays issue 25 finding
// 10 on a real daemon and sandbox: a tar upload over the limit answered 413
// but had already extracted its first 16 files, and a chunked raw upload
// over the limit answered 500. Every over-limit upload, tar or raw, with a
// Content-Length or chunked, now answers 413 and leaves the workspace
// exactly as it was (walked on the host: no file, no temporary).
func TestSecurityFilesOverLimitUploadLeavesNothing(t *testing.T) {
	e, alice, _ := filesEnv(t)
	base := serveFiles(t, e, "--files-max-bytes", "100000")
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "mkdir -p /workspace/in && echo keep > /workspace/in/old"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	ws := filepath.Join(e.state, "ws")
	snapshot := func() []string {
		var names []string
		if err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			names = append(names, p)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return names
	}
	before := snapshot()
	if !slices.ContainsFunc(before, func(p string) bool { return strings.HasSuffix(p, "/in/old") }) {
		t.Fatalf("the workspace is not under %s: %v", ws, before)
	}

	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	add := func(name string, size int) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(size), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(bytes.Repeat([]byte("x"), size)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 16 {
		add("f"+string(rune('a'+i)), 1000)
	}
	add("big", 150000)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := bytes.Repeat([]byte("y"), 150000)

	put := func(t *testing.T, contentType string, body []byte, chunked bool, path string) (int, string) {
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // no length known: the client sends it chunked
		}
		req, err := http.NewRequestWithContext(t.Context(), "PUT", base+"/v1/files?agent="+alice+"&path="+path, r)
		if err != nil {
			t.Fatal(err)
		}
		if chunked && req.ContentLength != 0 {
			t.Fatalf("the request has a length: %d", req.ContentLength)
		}
		req.Header.Set("Authorization", "Bearer "+filesToolToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, contentType, path string
		body                    []byte
		chunked                 bool
	}{
		{"tar with length", api.ContentTypeTar, "/workspace/in", archive.Bytes(), false},
		{"tar chunked", api.ContentTypeTar, "/workspace/in", archive.Bytes(), true},
		{"raw with length", "", "/workspace/in/raw", raw, false},
		{"raw chunked", "", "/workspace/in/raw", raw, true},
		{"raw chunked over an existing file", "", "/workspace/in/old", raw, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := put(t, tc.contentType, tc.body, tc.chunked, tc.path)
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "limit of 100000 bytes") {
				t.Errorf("answer %d %s, want 413 naming the limit", code, body)
			}
			if after := snapshot(); !slices.Equal(after, before) {
				t.Errorf("the workspace changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	if r := e.run(t, "exec", "--agent", alice, "--host", "sandbox", "--", "cat /workspace/in/old"); r.stdout != "keep\n" {
		t.Fatalf("the existing file changed: %+v", r)
	}
}
