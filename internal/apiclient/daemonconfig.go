package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
)

// DaemonConfigFileName is where a running daemon records the configuration
// it serves, in its state directory, so that a command given no --config
// uses the daemon's (cli.CLI.LoadConfig) instead of the built-in defaults.
const DaemonConfigFileName = "daemon-config.json"

// DaemonConfig is the content of <state>/daemon-config.json.
type DaemonConfig struct {
	PID int `json:"pid"`
	Identity
	// Content is the configuration file as the daemon read it (none with
	// ConfigFile "": the built-in defaults).
	Content string `json:"content,omitempty"`
}

// WriteDaemonConfig records dc in stateDir (mode 0600, atomically).
func WriteDaemonConfig(stateDir string, dc DaemonConfig) error {
	data, err := json.Marshal(dc)
	if err != nil {
		return fmt.Errorf("daemon config record: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(stateDir, DaemonConfigFileName), data, 0o600); err != nil {
		return fmt.Errorf("daemon config record: %w", err)
	}
	return nil
}

// RemoveDaemonConfig removes stateDir's record when the daemon pid wrote it.
func RemoveDaemonConfig(stateDir string, pid int) {
	path := filepath.Join(stateDir, DaemonConfigFileName)
	var dc DaemonConfig
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &dc) == nil && dc.PID == pid {
		_ = os.Remove(path)
	}
}

// ReadDaemonConfig returns the record of the daemon that runs for
// stateDir: ok is false when none runs (nobody holds the state directory's
// lock) or the running one left no record, so a record left by a daemon
// that died is never taken for the live one's.
func ReadDaemonConfig(stateDir string) (dc DaemonConfig, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(stateDir, DaemonConfigFileName))
	if errors.Is(err, os.ErrNotExist) {
		return dc, false, nil
	}
	if err != nil {
		return dc, false, fmt.Errorf("daemon config record: %w", err)
	}
	if err := json.Unmarshal(data, &dc); err != nil {
		return dc, false, fmt.Errorf("daemon config record %s: %w", filepath.Join(stateDir, DaemonConfigFileName), err)
	}
	if !locked(stateDir) {
		return dc, false, nil
	}
	if pid, err := ReadPIDFile(stateDir); err != nil || pid != dc.PID {
		return dc, false, nil
	}
	return dc, true, nil
}
