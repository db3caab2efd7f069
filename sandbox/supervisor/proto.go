package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ProtocolVersion is sent in Hello and checked by both sides.
const ProtocolVersion = 1

// Magic is the first byte of every frame; a frame that does not start with
// it makes the server resynchronise on the next Hello.
const Magic byte = 0xA5

// HeaderSize is the size of a frame header: magic, type, stream id, length.
const HeaderSize = 10

// MaxPayload bounds one frame's payload; larger frames are a protocol error.
const MaxPayload = 4 << 20

// Frame types. The direction is client (sandboxctl) → server (supervisor)
// unless marked otherwise.
const (
	FrameHello      byte = 1  // stream 0, JSON Hello
	FrameOpen       byte = 2  // new stream, JSON OpenSpec
	FrameAttach     byte = 3  // stream, JSON AttachSpec: bind a session to this stream, replay from offsets
	FrameStdin      byte = 4  // stream, raw bytes for the session's stdin
	FrameStdinClose byte = 5  // stream, no payload: EOF (^D on a PTY)
	FrameResize     byte = 6  // stream, JSON Size
	FrameSignal     byte = 7  // request id, JSON SignalSpec; answered by Result or Error
	FrameWindow     byte = 8  // stream, u32 big endian: more output credit in bytes
	FrameDetach     byte = 9  // stream: the client drops its interest; the session runs on
	FrameList       byte = 10 // request id, no payload; answered by Result (JSON []SessionInfo)
	FrameRead       byte = 11 // request id, JSON ReadSpec; answered by Result (raw output)
	FrameForget     byte = 12 // request id, JSON ReadSpec; answered by Result
	FramePing       byte = 13 // request id; answered by Result

	FrameHelloAck byte = 64 // server: stream 0, JSON HelloAck (broadcast to every attached client)
	FrameStarted  byte = 65 // server: stream, JSON Started
	FrameOutput   byte = 66 // server: stream, payload[0] = 1 stdout | 2 stderr, rest = data
	FrameOutputZ  byte = 71 // server: as Output, then u32 raw length, then the data as a DEFLATE stream (only after Hello asked for it)
	FrameStdinAck byte = 72 // server: stream, u32 big endian: stdin bytes the command took (stdin credit back; only when HelloAck.StdinAcks)
	FrameExit     byte = 67 // server: stream, JSON ExitStatus; no Output follows
	FrameStatus   byte = 68 // server: stream, JSON Status (input wait changes)
	FrameError    byte = 69 // server: stream or request id, UTF-8 message
	FrameResult   byte = 70 // server: request id, payload by request
)

// Output stream numbers inside an Output frame.
const (
	StreamStdout byte = 1
	StreamStderr byte = 2
)

// Frame is one protocol message.
type Frame struct {
	Type    byte
	Stream  uint32
	Payload []byte
}

// AppendFrame appends the encoded frame to b.
func AppendFrame(b []byte, typ byte, stream uint32, payload []byte) []byte {
	var h [HeaderSize]byte
	h[0] = Magic
	h[1] = typ
	binary.BigEndian.PutUint32(h[2:6], stream)
	binary.BigEndian.PutUint32(h[6:10], uint32(len(payload)))
	b = append(b, h[:]...)
	return append(b, payload...)
}

// ErrBadFrame is returned by ReadFrame for a header that does not start with
// Magic or announces a payload over MaxPayload.
var ErrBadFrame = errors.New("supervisor protocol: bad frame header")

// ReadFrame reads one frame from a buffered reader. The payload is a fresh
// slice.
func ReadFrame(r io.Reader) (Frame, error) {
	return readFrame(r, func(_ byte, n uint32) []byte { return make([]byte, n) })
}

// readFrame is ReadFrame with the payload read into alloc(type, length).
func readFrame(r io.Reader, alloc func(typ byte, n uint32) []byte) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	if h[0] != Magic {
		return Frame{}, fmt.Errorf("%w: magic %#x", ErrBadFrame, h[0])
	}
	n := binary.BigEndian.Uint32(h[6:10])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: payload of %d bytes", ErrBadFrame, n)
	}
	f := Frame{Type: h[1], Stream: binary.BigEndian.Uint32(h[2:6])}
	if n > 0 {
		f.Payload = alloc(f.Type, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			return Frame{}, fmt.Errorf("supervisor protocol: short payload: %w", err)
		}
	}
	return f, nil
}

// Hello opens a connection. Client is a random nonce; the newest Hello wins.
type Hello struct {
	Version int    `json:"version"`
	Client  string `json:"client"`
	// Deflate lets the server send bulk output as OutputZ frames.
	Deflate bool `json:"deflate,omitempty"`
}

// HelloAck answers a Hello. Every attached client sees it: a client that
// reads an ack for another nonce has been superseded and must stop.
type HelloAck struct {
	Version int    `json:"version"`
	Client  string `json:"client"`
	PID     int    `json:"pid"`
	Dir     string `json:"dir"` // where sessions are persisted ("" = memory only)
	// Socket is the server's local unix socket inside the container ("" =
	// none).
	Socket string `json:"socket,omitempty"`
	// Limits name what the server cannot do where it runs (e.g. input-wait
	// detection without /proc/PID/syscall and /proc/PID/wchan, as under
	// gVisor), one sentence each.
	Limits []string `json:"limits,omitempty"`
	// NoInputWait: input-wait detection is off (one of Limits says why).
	NoInputWait bool `json:"noInputWait,omitempty"`
	// StdinAcks: the server returns stdin credit in StdinAck frames, so a
	// client keeps at most StdinWindow bytes of a stream's stdin in flight
	// (a server without it drops stdin beyond its queue with an Error).
	StdinAcks bool `json:"stdinAcks,omitempty"`
	// Relay: the server's binary has the relay tool (RelayArg); a client
	// runs it only when the server says so (an older binary would take
	// the argument for a server of its own).
	Relay bool `json:"relay,omitempty"`
}

// OpenSpec starts a command.
type OpenSpec struct {
	// ID is the durable session id (also the value of SANDBOXCTL_RUN in
	// every process of the command); empty lets the server pick one.
	ID   string   `json:"id"`
	Argv []string `json:"argv"`
	// Env is the full environment of the command (KEY=VALUE); the server
	// adds SANDBOXCTL_RUN and, for a TTY, TERM=xterm-256color unless Env
	// itself has a TERM (the container's own TERM is replaced).
	Env []string `json:"env"`
	Dir string   `json:"dir,omitempty"`
	// PTY runs the command on a pseudo-terminal of Cols x Rows (wire name
	// "tty", doc.go).
	PTY  bool `json:"tty,omitempty"`
	Cols int  `json:"cols,omitempty"`
	Rows int  `json:"rows,omitempty"`
	// KeepStdin keeps stdin open for Stdin frames; without it the command
	// reads /dev/null (a PTY always has its terminal as stdin). Wire name
	// "stdin" (doc.go).
	KeepStdin bool `json:"stdin,omitempty"`
	// Meta is opaque caller data kept in meta.json (agent id, session key,
	// the caller's session id, the command line; the Meta* keys).
	Meta map[string]string `json:"meta,omitempty"`
	// Window is the initial output credit in bytes (default DefaultWindow).
	Window int64 `json:"window,omitempty"`
	// StartBy, when set (unix ms), is when the client stops waiting for
	// the answer: an Open the server reads later is refused, and nothing
	// runs. Set only by a client that shares the server's clock.
	StartBy int64 `json:"startByMs,omitempty"`
}

// AttachSpec binds an existing session to a stream of this connection and
// replays its output from the given per-stream offsets.
type AttachSpec struct {
	ID     string `json:"id"`
	Stdout int64  `json:"stdout"`
	Stderr int64  `json:"stderr"`
	Window int64  `json:"window,omitempty"`
}

// Size is a terminal size.
type Size struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// SignalSpec signals a session. With Tree the whole tree is ended: SIGTERM
// to every process of the session, SIGKILL after GraceMs to what is left;
// the Result comes once nothing of the tree is alive.
type SignalSpec struct {
	ID      string `json:"id"`
	Signal  int    `json:"signal,omitempty"`
	Tree    bool   `json:"tree,omitempty"`
	GraceMs int64  `json:"graceMs,omitempty"`
}

// ReadSpec names a session for Read and Forget.
type ReadSpec struct {
	ID string `json:"id"`
}

// Started answers Open and Attach.
type Started struct {
	ID        string `json:"id"`
	PID       int    `json:"pid"`
	StartedAt int64  `json:"startedAtMs"`
	// SkippedStdout and SkippedStderr (Attach only) are the bytes from the
	// requested offsets on that the capped log no longer has: the replay
	// starts that far past them.
	SkippedStdout int64 `json:"skippedStdout,omitempty"`
	SkippedStderr int64 `json:"skippedStderr,omitempty"`
}

// ExitStatus is how a command ended: Code, or Signal (e.g. "SIGKILL") with
// Code -1.
type ExitStatus struct {
	Code    int    `json:"code"`
	Signal  string `json:"signal,omitempty"`
	EndedAt int64  `json:"endedAtMs"`
	Error   string `json:"error,omitempty"`
}

// Status reports a change of a running session's state.
type Status struct {
	InputWait bool `json:"inputWait"`
}

// SessionInfo is one session as listed by the server.
type SessionInfo struct {
	ID        string            `json:"id"`
	Argv      []string          `json:"argv"`
	Dir       string            `json:"dir,omitempty"`
	PTY       bool              `json:"tty,omitempty"`   // OpenSpec.PTY
	KeepStdin bool              `json:"stdin,omitempty"` // OpenSpec.KeepStdin
	Meta      map[string]string `json:"meta,omitempty"`
	PID       int               `json:"pid"`
	StartedAt int64             `json:"startedAtMs"`
	Running   bool              `json:"running"`
	Exit      *ExitStatus       `json:"exit,omitempty"`
	InputWait bool              `json:"inputWait,omitempty"`
	// Stdout and Stderr are the byte counts produced so far on each stream;
	// Dropped is how many of the oldest bytes the capped log no longer has
	// (it keeps all output up to LogCap bytes, then the last LogCap to
	// 2*LogCap).
	Stdout  int64 `json:"stdout"`
	Stderr  int64 `json:"stderr"`
	Dropped int64 `json:"dropped,omitempty"`
	LogCap  int64 `json:"logCap,omitempty"`
}

// DroppedNote says what a session's log no longer keeps: "" while it keeps
// everything.
func (in SessionInfo) DroppedNote() string {
	if in.Dropped <= 0 {
		return ""
	}
	return fmt.Sprintf("output beyond the last %d bytes was not kept: the first %d of %d bytes are gone", in.LogCap, in.Dropped, in.Stdout+in.Stderr)
}

// DefaultWindow is the default output credit per stream.
const DefaultWindow = 4 << 20

// StdinWindow is the stdin a client keeps in flight per stream at most,
// against a server that acks stdin: half the server's queue
// (maxStdinQueue), so a command that reads slowly holds its writer back
// instead of overflowing the queue.
const StdinWindow = maxStdinQueue / 2

// The keys of OpenSpec.Meta that sandboxctl's hosts (the sandbox engines,
// the gateway, a node) keep for a restarted daemon. To the supervisor they
// are opaque.
const (
	MetaSessionID  = "sessionId"  // the hub's session id
	MetaCommand    = "command"    // the command line as the caller gave it
	MetaCwd        = "cwd"        // the working directory
	MetaAgentID    = "agentId"    // the scope's agent, as the session says
	MetaSessionKey = "sessionKey" // and its session key
)
