package apiclient

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestHoldsLock: the pid check of Stop's fallback sees this process's
// flock and no one else's.
func TestHoldsLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), api.LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := holdsLock(os.Getpid(), path); err == nil {
		t.Fatal("holdsLock before the flock")
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := holdsLock(os.Getpid(), path); err != nil {
		t.Fatalf("own flock not seen: %v", err)
	}
	if err := holdsLock(1, path); err == nil {
		t.Fatal("pid 1 reported as the holder")
	}
}
