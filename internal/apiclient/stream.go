package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// FrameStream reads the NDJSON frames of a streamed exec or a session
// stream, one at a time; Close ends it.
type FrameStream struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Next decodes the next frame; io.EOF when the daemon ended the stream.
func (s *FrameStream) Next() (toolapi.StreamFrame, error) {
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

func newFrameStream(body io.ReadCloser) *FrameStream {
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
}

func newExecBody(p toolapi.ExecParams, stream bool) execBody {
	return execBody{ExecParams: p, StrictWorkdir: p.StrictWorkdir, Cols: p.Cols, Rows: p.Rows, Stream: stream}
}

// ExecStream runs the exec tool with "stream": true: frames as they
// happen — start, stdout/stderr, dropped, status, exit — and last a
// "result" frame holding exactly what Exec would have returned. Bad input
// is an error here, as with Exec.
func (c *Client) ExecStream(ctx context.Context, p toolapi.ExecParams) (*FrameStream, error) {
	rc, err := c.send(ctx, "POST", "/v1/tools/exec", newExecBody(p, true))
	if err != nil {
		return nil, err
	}
	return newFrameStream(rc), nil
}

// SessionStream follows the backgrounded session id of the scope (agentID,
// sessionKey) from byte offset from to its "exit" frame.
func (c *Client) SessionStream(ctx context.Context, agentID, sessionKey, id string, from int64) (*FrameStream, error) {
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.FormatInt(from, 10))
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
	return newFrameStream(rc), nil
}
