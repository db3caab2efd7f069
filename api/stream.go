package api

// Frame types of a streamed exec (POST /v1/tools/exec with "stream": true)
// and of a session stream (GET /v1/sessions/{id}/stream): one JSON object a
// line (NDJSON), in the order things happened.
const (
	// FrameStart opens a stream: the session's id and pid.
	FrameStart = "start"
	// FrameStdout and FrameStderr carry output (Data) from Offset, an
	// absolute byte offset in the session's output; a PTY session's output
	// is all stdout.
	FrameStdout = "stdout"
	FrameStderr = "stderr"
	// FrameDropped says Lost bytes from Offset were dropped from the
	// session's kept output (its cap) before this reader reached them.
	FrameDropped = "dropped"
	// FrameStatus reports a change of the running session: Status
	// "waiting-for-input" or "running".
	FrameStatus = "status"
	// FrameExit closes a session stream: the session's final Status
	// ("completed" or "failed") with ExitCode, or Signal and Reason.
	FrameExit = "exit"
	// FrameResult closes a streamed exec: Result is exactly what the call
	// without "stream" would have answered.
	FrameResult = "result"
	// FrameError closes a stream that failed after it began.
	FrameError = "error"
)

// StreamFrame is one line of an output stream (see the Frame constants).
type StreamFrame struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	Data      string `json:"data,omitempty"`
	// Bytes is the output of a raw stream's stdout and stderr frames: the
	// command's exact bytes (base64 in JSON), Data's place.
	Bytes    []byte  `json:"bytes,omitempty"`
	Lost     int64   `json:"lost,omitempty"`
	Status   string  `json:"status,omitempty"`
	ExitCode *int    `json:"exitCode,omitempty"`
	Signal   string  `json:"signal,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Result   *Result `json:"result,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// Exit returns how the command of an exit frame ended (as Details.Exit
// reads a result); false for a frame of another type.
func (f StreamFrame) Exit() (Exit, bool) {
	if f.Type != FrameExit {
		return Exit{}, false
	}
	code, hasCode := 0, f.ExitCode != nil
	if hasCode {
		code = *f.ExitCode
	}
	return exitOf(f.Status, code, hasCode, f.Signal, f.Reason)
}

// ContentTypeFrames is the media type of a raw stream: binary frames, each
// a kind byte (FrameKind...), a big-endian uint32 payload length and the
// payload. A stdout or stderr frame's payload is the absolute offset of
// its output (big-endian int64), then the command's exact bytes; a JSON
// frame's is one StreamFrame (start, dropped, status, exit, result, error).
const ContentTypeFrames = "application/vnd.sandboxctl.frames"

// ContentTypeNDJSON is the media type of an NDJSON stream.
const ContentTypeNDJSON = "application/x-ndjson"

// The frame kinds of a raw stream.
const (
	FrameKindStdout = 'o'
	FrameKindStderr = 'e'
	FrameKindJSON   = 'j'
)
