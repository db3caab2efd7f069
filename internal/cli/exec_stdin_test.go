package cli

import (
	"os"
	"testing"

	"github.com/creack/pty"
)

// TestForwardsStdin: issue 15 item 2 — without a terminal on stdin the
// CLI's stdin is forwarded by default; a terminal only with -i.
func TestForwardsStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, c := range []struct {
		name             string
		in               *os.File
		interactive, tty bool
		want             bool
	}{
		{"pipe", r, false, false, true},
		{"dev-null", devnull, false, false, true},
		{"terminal", tty, false, false, false},
		{"terminal -i", tty, true, false, true},
		{"pipe -t", r, false, true, false},
		{"pipe -it", r, true, true, true},
	} {
		if got := forwardsStdin(c.in, c.interactive, c.tty); got != c.want {
			t.Errorf("%s: forwardsStdin = %v, want %v", c.name, got, c.want)
		}
	}
}
