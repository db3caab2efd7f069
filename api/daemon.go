package api

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Names of the daemon's files inside the state directory.
const (
	SocketName   = "sandboxctl.sock"
	PIDFileName  = "daemon.pid"
	LockFileName = "daemon.lock"
	LogFileName  = "daemon.log"
	// TokenFileName holds the TCP listener's bearer token (mode 0600).
	TokenFileName = "token"
	// DaemonConfigFileName is where a running daemon records the
	// configuration it serves (DaemonConfig), so that a command given no
	// --config uses the daemon's instead of the built-in defaults.
	DaemonConfigFileName = "daemon-config.json"
)

// DaemonConfig is the content of <state>/daemon-config.json.
type DaemonConfig struct {
	PID int `json:"pid"`
	Identity
	// Content is the configuration file as the daemon read it (none with
	// ConfigFile "": the built-in defaults).
	Content string `json:"content,omitempty"`
	// Exec is what a client applies to an exec itself under this
	// configuration, as the daemon read it from Content: a client of the
	// same file takes it from here rather than parse the file again.
	// Absent from the record of an older daemon.
	Exec *ExecSettings `json:"exec,omitempty"`
}

// ExecSettings are the exec settings of a configuration that a client
// applies itself: the default host (exec.host), the gateway's working
// directory (exec.cwd, "" = the caller's), and the timeout of a run it
// waits for (exec.timeoutSec, in seconds, 0 = none).
type ExecSettings struct {
	Host       string `json:"host"`
	Cwd        string `json:"cwd,omitempty"`
	TimeoutSec int    `json:"timeoutSec,omitempty"`
}

// SocketPath is the daemon's unix socket inside stateDir.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketName) }

// ReadPIDFile returns the pid recorded in <stateDir>/daemon.pid.
func ReadPIDFile(stateDir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, PIDFileName))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("daemon: pid file holds %q, not a pid", strings.TrimSpace(string(data)))
	}
	return pid, nil
}

// Health is the body of GET /healthz.
type Health struct {
	OK      bool   `json:"ok"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	Identity
	// Socket is the daemon's unix socket; StartedAt when it started.
	Socket    string    `json:"socket,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// Identity is the configuration a daemon serves.
type Identity struct {
	ConfigFile string `json:"configFile,omitempty"` // absolute; "" = built-in defaults
	ConfigHash string `json:"configHash,omitempty"` // of the file's content and Engine
	Engine     string `json:"engine,omitempty"`     // DOCKER_HOST; "" = the Docker default
}

// Headers that carry a client's Identity; a daemon serving another answers
// 409.
const (
	HeaderConfigHash = "Sandboxctl-Config-Hash"
	HeaderConfigFile = "Sandboxctl-Config-File" // query-escaped
	HeaderEngine     = "Sandboxctl-Engine"      // query-escaped
)

// ConsoleClientPIDsHeader is set by `sandboxctl ui` on every request it
// forwards to the console: the pids of the processes holding the browser's
// end of the connection (comma-separated; empty when it could not tell).
// The daemon holds them to the same rule as the forwarder itself before a
// login or a decision (see daemon's console vet).
const ConsoleClientPIDsHeader = "X-Sandboxctl-Console-Client-Pids"

// ConsoleLoginPath mints a one-time login link to the web console (POST,
// on the unix socket only, for a peer that may decide approvals).
const ConsoleLoginPath = "/v1/ui/login"

// CommandNotFound ends the message of a command that could not start
// because its program is not found; the supervisor writes it, and its
// client reads it back as ErrCommandNotFound.
const CommandNotFound = "command not found"

// ErrCommandNotFound is a command that did not start because its program
// is not found. Its answer is a 400 whose field is "start" and whose code
// is ErrorCodeCommandNotFound; the CLI exits 127 on it, as a shell does.
var ErrCommandNotFound = errors.New(CommandNotFound)

// ErrorCode classes an error answer for a client that branches on it
// (ErrorBody.Code); most answers have none, their status says enough.
type ErrorCode string

// The error codes.
const (
	// ErrorCodeCommandNotFound: ErrCommandNotFound.
	ErrorCodeCommandNotFound ErrorCode = "command-not-found"
)

// ErrorBody is the body of every non-2xx answer of the daemon.
type ErrorBody struct {
	Error string `json:"error"`
	// Field names the request field a 400 is about (toolapi.InputError):
	// "workdir", "env", ...; "start" when the command itself could not
	// start (its program, its environment).
	Field string `json:"field,omitempty"`
	// Code classes the error further, where a client branches on more
	// than the status and field.
	Code ErrorCode `json:"code,omitempty"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Details `json:"sessions"`
}

// ShutdownAnswer is the body of POST /v1/shutdown (202): the daemon that
// is shutting down.
type ShutdownAnswer struct {
	OK  bool `json:"ok"`
	PID int  `json:"pid"`
}
