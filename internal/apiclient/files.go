package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/sandboxctl/sandboxctl/api"
)

func fileQuery(f api.FileRef, extra ...string) string {
	q := url.Values{"path": {f.Path}}
	if f.AgentID != "" {
		q.Set("agent", f.AgentID)
	}
	if f.SessionKey != "" {
		q.Set("session", f.SessionKey)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q.Encode()
}

// StatFile describes f.Path (a symlink as itself).
func (c *Client) StatFile(ctx context.Context, f api.FileRef) (api.FileInfo, error) {
	var fi api.FileInfo
	raw, err := c.do(ctx, "GET", "/v1/files/stat?"+fileQuery(f), nil)
	if err != nil {
		return fi, err
	}
	return fi, json.Unmarshal(raw, &fi)
}

// ListFiles lists directory f.Path.
func (c *Client) ListFiles(ctx context.Context, f api.FileRef) (api.FileList, error) {
	var l api.FileList
	raw, err := c.do(ctx, "GET", "/v1/files/list?"+fileQuery(f), nil)
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(raw, &l)
}

// DownloadTar returns f.Path (a file or a tree) as a tar stream named from
// its base name, as `docker cp` writes it. Close it.
func (c *Client) DownloadTar(ctx context.Context, f api.FileRef) (io.ReadCloser, error) {
	return c.send(ctx, "GET", "/v1/files?"+fileQuery(f, "format", "tar"), nil)
}

// Download returns the content of the regular file f.Path. Close it.
func (c *Client) Download(ctx context.Context, f api.FileRef) (io.ReadCloser, error) {
	return c.send(ctx, "GET", "/v1/files?"+fileQuery(f, "format", "raw"), nil)
}

// UploadTar extracts a tar stream of n bytes into the existing directory
// f.Path.
func (c *Client) UploadTar(ctx context.Context, f api.FileRef, r io.Reader, n int64) error {
	return c.upload(ctx, "/v1/files?"+fileQuery(f), api.ContentTypeTar, r, n)
}

// Upload writes n bytes from r to the file f.Path (mode 0 = 0644).
func (c *Client) Upload(ctx context.Context, f api.FileRef, mode uint32, r io.Reader, n int64) error {
	var extra []string
	if mode != 0 {
		extra = []string{"mode", "0" + strconv.FormatUint(uint64(mode), 8)}
	}
	return c.upload(ctx, "/v1/files?"+fileQuery(f, extra...), api.ContentTypeBinary, r, n)
}

// RemoveFile removes f.Path (recursively).
func (c *Client) RemoveFile(ctx context.Context, f api.FileRef) error {
	_, err := c.do(ctx, "DELETE", "/v1/files?"+fileQuery(f), nil)
	return err
}

func (c *Client) upload(ctx context.Context, path, contentType string, r io.Reader, n int64) error {
	req := Request{Method: "PUT", URL: c.base + path, Path: path, Header: map[string]string{"Content-Type": contentType},
		Stream: r, StreamLen: n}
	if c.token != "" {
		req.Header["Authorization"] = "Bearer " + c.token
	}
	rc, err := c.roundTrip(ctx, req)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	return rc.Close()
}
