// Package termsize sets a terminal's size. It is shared by the gateway host
// (hostexec) and the in-container supervisor, so it imports only
// golang.org/x/sys.
package termsize

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Set sets the size of terminal f (a pty master) with TIOCSWINSZ, through
// SyscallConn: File.Fd (which pty.Setsize calls) would put the file back in
// blocking mode and take it off the runtime's poller.
func Set(f *os.File, cols, rows int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
	}); err != nil {
		return err
	}
	if ierr != nil {
		return fmt.Errorf("TIOCSWINSZ: %w", ierr)
	}
	return nil
}

// DefaultCols and DefaultRows are the size of a PTY whose caller gives
// none (docs/tools.md): every host starts its terminals so.
const (
	DefaultCols = 120
	DefaultRows = 30
)
