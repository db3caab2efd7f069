package apiclient

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/sandboxctl/sandboxctl/api"
)

// maxRawFrame bounds one raw frame's payload as the client reads it.
const maxRawFrame = 16 << 20

// FrameStream reads the frames of a streamed exec or a session stream,
// NDJSON or raw, one at a time; Close ends it.
type FrameStream struct {
	body io.ReadCloser
	dec  *json.Decoder // NDJSON
	br   *bufio.Reader // raw frames
	hdr  [5]byte
}

// Next decodes the next frame; io.EOF when the daemon ended the stream.
// A raw stream's stdout and stderr frames carry Bytes, not Data.
func (s *FrameStream) Next() (api.StreamFrame, error) {
	if s.br != nil {
		return s.nextRaw()
	}
	var f api.StreamFrame
	if err := s.dec.Decode(&f); err != nil {
		if err == io.EOF {
			return f, io.EOF
		}
		return f, fmt.Errorf("daemon: read stream frame: %w", err)
	}
	return f, nil
}

// Close ends the stream (the session goes on).
func (s *FrameStream) Close() error { return s.body.Close() }

func (s *FrameStream) nextRaw() (api.StreamFrame, error) {
	var f api.StreamFrame
	if _, err := io.ReadFull(s.br, s.hdr[:]); err != nil {
		if err == io.EOF {
			return f, io.EOF
		}
		return f, fmt.Errorf("daemon: read stream frame: %w", err)
	}
	n := binary.BigEndian.Uint32(s.hdr[1:])
	if n > maxRawFrame {
		return f, fmt.Errorf("daemon: read stream frame: a frame of %d bytes (at most %d)", n, maxRawFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(s.br, payload); err != nil {
		return f, fmt.Errorf("daemon: read stream frame: %w", noEOF(err))
	}
	switch s.hdr[0] {
	case api.FrameKindStdout, api.FrameKindStderr:
		if n < 8 {
			return f, fmt.Errorf("daemon: read stream frame: an output frame of %d bytes has no offset", n)
		}
		f.Type = api.FrameStdout
		if s.hdr[0] == api.FrameKindStderr {
			f.Type = api.FrameStderr
		}
		off := int64(binary.BigEndian.Uint64(payload[:8]))
		f.Offset, f.Bytes = &off, payload[8:]
	case api.FrameKindJSON:
		if err := json.Unmarshal(payload, &f); err != nil {
			return f, fmt.Errorf("daemon: read stream frame: %w", err)
		}
	default:
		return f, fmt.Errorf("daemon: read stream frame: unknown kind %q", s.hdr[0])
	}
	return f, nil
}

// noEOF turns the end of a stream inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func newFrameStream(body io.ReadCloser, raw bool) *FrameStream {
	if raw {
		return &FrameStream{body: body, br: bufio.NewReaderSize(body, 64<<10)}
	}
	return &FrameStream{body: body, dec: json.NewDecoder(bufio.NewReader(body))}
}

// ExecStream runs the exec tool with "stream": true: frames as they
// happen — start, stdout/stderr, dropped, status, exit — and last a
// "result" frame holding exactly what Exec would have returned. Bad input
// is an error here, as with Exec. With p.Raw the frames carry the
// command's exact bytes, and a slow reader holds the command back.
func (c *Client) ExecStream(ctx context.Context, p api.ExecParams) (*FrameStream, error) {
	rc, err := c.send(ctx, "POST", "/v1/tools/exec", api.NewExecRequest(p, true))
	if err != nil {
		return nil, err
	}
	return newFrameStream(rc, p.Raw), nil
}

// SessionStream follows the backgrounded session id of the scope (agentID,
// sessionKey) from byte offset from to its "exit" frame. raw follows the
// exact bytes of a session started with ExecParams.Raw: its frames carry
// Bytes, and the command waits for this reader instead of losing output.
func (c *Client) SessionStream(ctx context.Context, agentID, sessionKey, id string, from int64, raw bool) (*FrameStream, error) {
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.FormatInt(from, 10))
	}
	if raw {
		q.Set("raw", "1")
	}
	if agentID != "" {
		q.Set("agent", agentID)
	}
	if sessionKey != "" {
		q.Set("sessionKey", sessionKey)
	}
	path := "/v1/sessions/" + url.PathEscape(id) + "/stream"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	rc, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	return newFrameStream(rc, raw), nil
}

// WriteStdin writes data, byte for byte, to the stdin of the backgrounded
// session id of the scope (agentID, sessionKey), then closes it when eof
// (POST /v1/sessions/{id}/stdin); at most 8 MiB a call.
func (c *Client) WriteStdin(ctx context.Context, agentID, sessionKey, id string, data []byte, eof bool) (api.Result, error) {
	q := url.Values{}
	if eof {
		q.Set("eof", "1")
	}
	if agentID != "" {
		q.Set("agent", agentID)
	}
	if sessionKey != "" {
		q.Set("sessionKey", sessionKey)
	}
	path := "/v1/sessions/" + url.PathEscape(id) + "/stdin"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req := Request{Method: "POST", URL: c.base + path, Path: path, Header: map[string]string{"Content-Type": "application/octet-stream"}, Body: data}
	if data == nil {
		req.Body = []byte{}
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header["Authorization"] = "Bearer " + c.token
	}
	rc, err := c.roundTrip(ctx, req)
	if err != nil {
		return api.Result{}, err
	}
	defer rc.Close()
	var res api.Result
	if err := json.NewDecoder(rc).Decode(&res); err != nil {
		return res, fmt.Errorf("daemon: POST %s: decode the answer: %w", path, err)
	}
	return res, res.Err()
}
