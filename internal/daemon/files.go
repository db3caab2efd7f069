package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxctl/sandboxctl/api"
)

// StateLock is the held lock of a state directory (see LockStateDir).
type StateLock struct{ f *os.File }

// LockStateDir creates the state directory (mode 0700) when missing and
// takes its lock, failing with ErrAlreadyRunning when a daemon holds it. A
// daemon takes it before it touches anything of the directory or of the
// sandboxes it owns, then hands it to Listen (Options.Lock).
func LockStateDir(stateDir string) (*StateLock, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: create state directory: %w", err)
	}
	f, err := lockStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	return &StateLock{f: f}, nil
}

// Release drops the lock (Listen's Server releases a lock it was given).
func (l *StateLock) Release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// lockStateDir takes an exclusive, non-blocking flock on <dir>/daemon.lock.
// The kernel drops it when the process dies, so unlike the pid file it can
// never go stale.
func lockStateDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, api.LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid, perr := api.ReadPIDFile(dir); perr == nil {
				return nil, fmt.Errorf("daemon: %w (pid %d holds %s)", ErrAlreadyRunning, pid, path)
			}
			return nil, fmt.Errorf("daemon: %w (%s is locked)", ErrAlreadyRunning, path)
		}
		return nil, fmt.Errorf("daemon: lock %s: %w", path, err)
	}
	return f, nil
}

// LoadOrCreateToken returns the TCP bearer token in <stateDir>/token,
// generating 32 random bytes (hex) with mode 0600 when the file is missing. A
// token file that others can read is refused rather than used.
func LoadOrCreateToken(stateDir string) (string, error) {
	return LoadOrCreateSecret(filepath.Join(stateDir, api.TokenFileName))
}

// NodeTokenFileName holds the token node agents present to the gateway; it
// is separate from the API token so a node cannot call the tools.
const NodeTokenFileName = "node-token"

// LoadOrCreateSecret reads the secret in path, or creates it (32 random
// bytes, hex, mode 0600) when missing.
func LoadOrCreateSecret(path string) (string, error) {
	for range 2 {
		tok, err := readToken(path)
		if err == nil {
			return tok, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		buf := make([]byte, 32)
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("daemon: generate token: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue // created concurrently: read theirs
		}
		if err != nil {
			return "", fmt.Errorf("daemon: create token file: %w", err)
		}
		tok = hex.EncodeToString(buf)
		_, werr := f.WriteString(tok + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return "", fmt.Errorf("daemon: write token file: %w", werr)
		}
		return tok, nil
	}
	return readToken(path)
}

func readToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("daemon: token file %s is readable by others (mode %04o); run chmod 600 on it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("daemon: read token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("daemon: token file %s is empty", path)
	}
	return tok, nil
}
