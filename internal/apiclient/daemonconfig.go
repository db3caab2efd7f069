package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
)

// WriteDaemonConfig records dc in stateDir (mode 0600, atomically).
func WriteDaemonConfig(stateDir string, dc api.DaemonConfig) error {
	data, err := json.Marshal(dc)
	if err != nil {
		return fmt.Errorf("daemon config record: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(stateDir, api.DaemonConfigFileName), data, 0o600); err != nil {
		return fmt.Errorf("daemon config record: %w", err)
	}
	return nil
}

// RemoveDaemonConfig removes stateDir's record when the daemon pid wrote it.
func RemoveDaemonConfig(stateDir string, pid int) {
	path := filepath.Join(stateDir, api.DaemonConfigFileName)
	var dc api.DaemonConfig
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &dc) == nil && dc.PID == pid {
		_ = os.Remove(path)
	}
}

// ReadDaemonConfig returns the record of the daemon that runs for
// stateDir: ok is false when none runs (nobody holds the state directory's
// lock) or the running one left no record, so a record left by a daemon
// that died is never taken for the live one's.
func ReadDaemonConfig(stateDir string) (dc api.DaemonConfig, ok bool, err error) {
	dc, err = ReadDaemonRecord(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return dc, false, nil
	}
	if err != nil {
		return dc, false, err
	}
	if !locked(stateDir) {
		return dc, false, nil
	}
	if pid, err := api.ReadPIDFile(stateDir); err != nil || pid != dc.PID {
		return dc, false, nil
	}
	return dc, true, nil
}

// ReadDaemonRecord reads stateDir's record, whether or not the daemon that
// wrote it still runs (ReadDaemonConfig tells): what it derived from its
// configuration's content holds for that content either way.
func ReadDaemonRecord(stateDir string) (api.DaemonConfig, error) {
	var dc api.DaemonConfig
	data, err := os.ReadFile(filepath.Join(stateDir, api.DaemonConfigFileName))
	if err != nil {
		return dc, fmt.Errorf("daemon config record: %w", err)
	}
	if err := json.Unmarshal(data, &dc); err != nil {
		return dc, fmt.Errorf("daemon config record %s: %w", filepath.Join(stateDir, api.DaemonConfigFileName), err)
	}
	return dc, nil
}
