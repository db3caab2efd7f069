package hostsup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// The test binary plays two more parts, chosen by this variable: the host
// supervisor itself ("serve", in $HOSTSUP_TEST_DIR), and a command that
// tries to take over its socket ("intruder": prints ACK if the supervisor
// answered its Hello, REFUSED if not).
const roleEnv = "HOSTSUP_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := Serve(ctx, os.Getenv("HOSTSUP_TEST_DIR"), func(string, ...any) {}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "intruder":
		fmt.Println(intrude(os.Getenv("HOSTSUP_TEST_SOCK")))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func intrude(sock string) string {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return "REFUSED (dial: " + err.Error() + ")"
	}
	defer c.Close()
	hello, _ := json.Marshal(supervisor.Hello{Version: supervisor.ProtocolVersion, Client: "intruder"})
	if _, err := c.Write(supervisor.AppendFrame(nil, supervisor.FrameHello, 0, hello)); err != nil {
		return "REFUSED (write: " + err.Error() + ")"
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	f, err := supervisor.ReadFrame(c)
	if err != nil {
		return "REFUSED (" + err.Error() + ")"
	}
	if f.Type == supervisor.FrameHelloAck {
		return "ACK"
	}
	return fmt.Sprintf("REFUSED (frame %d)", f.Type)
}

// TestSecurityCommandCannotTakeOverHostSupervisor: a command the host
// supervisor runs (and an orphan such a command leaves, reparented to the
// supervisor) connects to the supervisor's socket and says Hello: it is
// refused, while the daemon (this process, not a descendant) is served.
func TestSecurityCommandCannotTakeOverHostSupervisor(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sup")
	s, err := New(Options{
		Dir: dir, Command: []string{os.Args[0], "-test.run=^$"},
		Env: append(os.Environ(), roleEnv+"=serve", "HOSTSUP_TEST_DIR="+dir), Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	env := append(os.Environ(), roleEnv+"=intruder", "HOSTSUP_TEST_SOCK="+SocketPath(dir))
	orphanOut := filepath.Join(t.TempDir(), "orphan")
	for _, tc := range []struct {
		name string
		argv []string
		out  func(p *supervisor.Proc) string
	}{
		{"command", []string{os.Args[0], "-test.run=^$"}, readAll},
		{"orphan", []string{"/bin/sh", "-c", `(setsid "$0" -test.run='^$' > "$1" &); while [ ! -s "$1" ]; do sleep 0.05; done`, os.Args[0], orphanOut},
			func(p *supervisor.Proc) string { readAll(p); b, _ := os.ReadFile(orphanOut); return string(b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := s.Open(ctx, supervisor.OpenSpec{ID: "intruder-" + tc.name, Argv: tc.argv, Env: env})
			if err != nil {
				t.Fatalf("the daemon's Open was refused: %v", err)
			}
			if got := tc.out(p); !strings.HasPrefix(got, "REFUSED") {
				t.Fatalf("the %s's Hello: %q", tc.name, got)
			}
			if _, _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func readAll(p *supervisor.Proc) string {
	b, _ := io.ReadAll(p.Stdout())
	return string(b)
}
