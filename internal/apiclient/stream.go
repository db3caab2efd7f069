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

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// ContentTypeFrames is the media type of a raw stream: binary frames, each
// a kind byte (FrameKind...), a big-endian uint32 payload length and the
// payload. A stdout or stderr frame's payload is the absolute offset of
// its output (big-endian int64), then the command's exact bytes; a JSON
// frame's is one StreamFrame (start, dropped, status, exit, result, error).
const ContentTypeFrames = "application/vnd.sandboxctl.frames"

// The frame kinds of a raw stream.
const (
	FrameKindStdout = 'o'
	FrameKindStderr = 'e'
	FrameKindJSON   = 'j'
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
func (s *FrameStream) Next() (toolapi.StreamFrame, error) {
	if s.br != nil {
		return s.nextRaw()
	}
	var f toolapi.StreamFrame
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

func (s *FrameStream) nextRaw() (toolapi.StreamFrame, error) {
	var f toolapi.StreamFrame
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
	case FrameKindStdout, FrameKindStderr:
		if n < 8 {
			return f, fmt.Errorf("daemon: read stream frame: an output frame of %d bytes has no offset", n)
		}
		f.Type = toolapi.FrameStdout
		if s.hdr[0] == FrameKindStderr {
			f.Type = toolapi.FrameStderr
		}
		off := int64(binary.BigEndian.Uint64(payload[:8]))
		f.Offset, f.Bytes = &off, payload[8:]
	case FrameKindJSON:
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
		return &FrameStream{body: body, br: bufio.NewReaderSize(body, 256<<10)}
	}
	return &FrameStream{body: body, dec: json.NewDecoder(bufio.NewReader(body))}
}

// execBody is the body of POST /v1/tools/exec: the tool's input and the
// HTTP API's own fields.
type execBody struct {
	toolapi.ExecParams
	StrictWorkdir bool `json:"strictWorkdir,omitempty"`
	Cols          int  `json:"cols,omitempty"`
	Rows          int  `json:"rows,omitempty"`
	Stream        bool `json:"stream,omitempty"`
	Raw           bool `json:"raw,omitempty"`
}

func newExecBody(p toolapi.ExecParams, stream bool) execBody {
	return execBody{ExecParams: p, StrictWorkdir: p.StrictWorkdir, Cols: p.Cols, Rows: p.Rows, Stream: stream, Raw: p.Raw}
}

// ExecStream runs the exec tool with "stream": true: frames as they
// happen — start, stdout/stderr, dropped, status, exit — and last a
// "result" frame holding exactly what Exec would have returned. Bad input
// is an error here, as with Exec. With p.Raw the frames carry the
// command's exact bytes, and a slow reader holds the command back.
func (c *Client) ExecStream(ctx context.Context, p toolapi.ExecParams) (*FrameStream, error) {
	rc, err := c.send(ctx, "POST", "/v1/tools/exec", newExecBody(p, true))
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
func (c *Client) WriteStdin(ctx context.Context, agentID, sessionKey, id string, data []byte, eof bool) (toolapi.Result, error) {
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
		return toolapi.Result{}, err
	}
	defer rc.Close()
	var res toolapi.Result
	if err := json.NewDecoder(rc).Decode(&res); err != nil {
		return res, fmt.Errorf("daemon: POST %s: decode the answer: %w", path, err)
	}
	return res, res.Err()
}
