package e2b

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The envd messages below are written from the wire format the e2b SDK
// speaks: Connect over HTTP with the JSON codec (protobuf's JSON mapping:
// lowerCamelCase names, int64 as a string, enums by name, bytes in base64,
// one oneof member set). Field names and enum values are facts of that
// format; the Go types are ours.

// jsonCodec is Connect's "json" codec over encoding/json, for the types
// below (Connect's own JSON codec needs generated protobuf messages).
type jsonCodec struct{}

func (jsonCodec) Name() string { return "json" }

func (jsonCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec) Unmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}

// int64String is a protobuf int64 in JSON: a string on output, a string or
// a number on input.
type int64String int64

func (v int64String) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatInt(int64(v), 10))
}

func (v *int64String) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		n, err := strconv.ParseInt(s, 10, 64)
		*v = int64String(n)
		return err
	}
	var n int64
	err := json.Unmarshal(b, &n)
	*v = int64String(n)
	return err
}

// enumValue parses a protobuf enum in JSON: its name or its number.
func enumValue(b []byte, names map[string]int32) (int32, error) {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if n, ok := names[s]; ok {
			return n, nil
		}
		return 0, fmt.Errorf("unknown enum value %q", s)
	}
	var n int32
	err := json.Unmarshal(b, &n)
	return n, err
}

// --- process.Process ---

type ptySize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

type ptyConfig struct {
	Size *ptySize `json:"size,omitempty"`
}

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type startRequest struct {
	Process *processConfig `json:"process"`
	PTY     *ptyConfig     `json:"pty,omitempty"`
	Tag     *string        `json:"tag,omitempty"`
	Stdin   *bool          `json:"stdin,omitempty"`
}

type processSelector struct {
	PID *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

type connectRequest struct {
	Process *processSelector `json:"process"`
}

type empty struct{}

type startEvent struct {
	PID uint32 `json:"pid"`
}

type dataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	PTY    []byte `json:"pty,omitempty"`
}

type endEvent struct {
	ExitCode int32   `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

type processEvent struct {
	Start     *startEvent `json:"start,omitempty"`
	Data      *dataEvent  `json:"data,omitempty"`
	End       *endEvent   `json:"end,omitempty"`
	Keepalive *empty      `json:"keepalive,omitempty"`
}

// eventResponse is both StartResponse and ConnectResponse.
type eventResponse struct {
	Event processEvent `json:"event"`
}

type processInfo struct {
	Config processConfig `json:"config"`
	PID    uint32        `json:"pid"`
	Tag    *string       `json:"tag,omitempty"`
}

type listResponse struct {
	Processes []processInfo `json:"processes"`
}

type processInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	PTY   []byte `json:"pty,omitempty"`
}

type sendInputRequest struct {
	Process *processSelector `json:"process"`
	Input   *processInput    `json:"input"`
}

// signal is process.Signal.
type signal int32

const (
	signalSIGKILL signal = 9
	signalSIGTERM signal = 15
)

func (s *signal) UnmarshalJSON(b []byte) error {
	n, err := enumValue(b, map[string]int32{"SIGNAL_UNSPECIFIED": 0, "SIGNAL_SIGTERM": 15, "SIGNAL_SIGKILL": 9})
	*s = signal(n)
	return err
}

type sendSignalRequest struct {
	Process *processSelector `json:"process"`
	Signal  signal           `json:"signal"`
}

type closeStdinRequest struct {
	Process *processSelector `json:"process"`
}

type updateRequest struct {
	Process *processSelector `json:"process"`
	PTY     *ptyConfig       `json:"pty,omitempty"`
}

// --- filesystem.Filesystem ---

// fileType is filesystem.FileType, written by name.
type fileType string

const (
	fileTypeFile      fileType = "FILE_TYPE_FILE"
	fileTypeDirectory fileType = "FILE_TYPE_DIRECTORY"
	fileTypeSymlink   fileType = "FILE_TYPE_SYMLINK"
	fileTypeOther     fileType = "FILE_TYPE_UNSPECIFIED"
)

// eventType is filesystem.EventType, written by name.
type eventType string

const (
	eventCreate eventType = "EVENT_TYPE_CREATE"
	eventWrite  eventType = "EVENT_TYPE_WRITE"
	eventRemove eventType = "EVENT_TYPE_REMOVE"
)

type entryInfo struct {
	Name          string      `json:"name"`
	Type          fileType    `json:"type"`
	Path          string      `json:"path"`
	Size          int64String `json:"size"`
	Mode          uint32      `json:"mode"`
	Permissions   string      `json:"permissions"`
	Owner         string      `json:"owner"`
	Group         string      `json:"group"`
	ModifiedTime  time.Time   `json:"modifiedTime"`
	SymlinkTarget *string     `json:"symlinkTarget,omitempty"`
}

type pathRequest struct {
	Path string `json:"path"`
}

type entryResponse struct {
	Entry entryInfo `json:"entry"`
}

type moveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

type listDirRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth"`
}

type listDirResponse struct {
	Entries []entryInfo `json:"entries"`
}

type watchDirRequest struct {
	Path         string `json:"path"`
	Recursive    bool   `json:"recursive"`
	IncludeEntry bool   `json:"includeEntry"`
}

type filesystemEvent struct {
	Name string    `json:"name"`
	Type eventType `json:"type"`
}

type watchDirResponse struct {
	Start      *empty           `json:"start,omitempty"`
	Filesystem *filesystemEvent `json:"filesystem,omitempty"`
	Keepalive  *empty           `json:"keepalive,omitempty"`
}

type createWatcherResponse struct {
	WatcherID string `json:"watcherId"`
}

// watcherRequest is GetWatcherEventsRequest and RemoveWatcherRequest.
type watcherRequest struct {
	WatcherID string `json:"watcherId"`
}

type watcherEventsResponse struct {
	Events []filesystemEvent `json:"events"`
}
