package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// fullImage is the Debian sandbox image (it has perl, whose socket module
// plays the part of a hostile process inside the sandbox).
var fullImage = envOr("SANDBOXCTL_FULL_IMAGE", "sandboxctl/sandbox:bookworm")

// perlHello connects to the supervisor socket from inside the sandbox,
// sends a Hello frame and reports whether anything answered.
const perlHello = `perl -MIO::Socket::UNIX -e '
$SIG{PIPE} = "IGNORE"; # the supervisor may hang up before the write
my $c = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => "/run/sandboxctl/supervisor.sock") or die "connect: $!\n";
my $j = q({"version":1,"client":"intruder"});
print $c pack("CCNN", 0xA5, 1, 0, length $j) . $j;
$c->flush;
my $n = sysread($c, my $buf, 64);
print $n ? "answered\n" : "refused\n";'`

// perlFakeSupervisor replaces the socket with one of its own and accepts
// connections, holding them open.
const perlFakeSupervisor = `perl -MIO::Socket::UNIX -e '
my $p = "/run/sandboxctl/supervisor.sock";
unlink $p;
my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $p, Listen => 5) or die "listen: $!\n";
print "listening\n"; STDOUT->flush;
my @held; while (my $c = $s->accept) { push @held, $c }'`

// TestSupervisedLocalSocket: a root daemon on the Engine's host talks to the
// supervisor over its socket; a process inside the sandbox can neither use
// that socket nor, by replacing it, impersonate the supervisor (the client
// then falls back to the attach stream).
func TestSupervisedLocalSocket(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.Image = fullImage })
	s := Scope{AgentID: "sock"}
	st := startCmd(t, m, s, `echo hi`, nil)
	if out, _, code, _ := drain(t, mustSupervised(t, st)); out != "hi\n" || code != 0 {
		t.Fatalf("first command: %q %d", out, code)
	}
	cl, err := m.supervisorClient(ctxT(t), st.Ensure.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !cl.Local() {
		t.Fatal("connected over the attach stream although the supervisor's socket is reachable from this host")
	}

	// Nor reach the supervisor's own descriptors (the attach stream's
	// pipes): it is not dumpable.
	if out, _ := run(t, m, s, `for p in /proc/[0-9]*; do [ "$(cat $p/cmdline 2>/dev/null | tr '\0' ' ' | cut -d' ' -f1)" = "`+SupervisorPath+`" ] && sup=$p; done; echo $sup; readlink $sup/fd/0 >/dev/null 2>&1 && echo reachable || echo denied`); !strings.HasSuffix(out, "\ndenied\n") || !strings.HasPrefix(out, "/proc/") {
		t.Fatalf("supervisor's descriptors from inside the sandbox: %q", out)
	}
	// Under a sandbox identity the socket's directory is the supervisor
	// uid's (connect fails); without one the peer check refuses.
	if out, code := run(t, m, s, perlHello); (strings.TrimSpace(out) != "refused" || code != 0) && strings.TrimSpace(out) != "connect: Permission denied" {
		t.Fatalf("a process in the sandbox used the supervisor socket: %q (exit %d)", out, code)
	}
	if !cl.Local() || cl.Err() != nil {
		t.Fatalf("the intruder disturbed the daemon's connection: local %v err %v", cl.Local(), cl.Err())
	}

	fake := startCmd(t, m, s, perlFakeSupervisor, nil)
	fp := mustSupervised(t, fake)
	line := make([]byte, len("listening\n"))
	if _, err := fp.Stdout().Read(line); err != nil || string(line) != "listening\n" {
		t.Fatalf("fake supervisor: %q %v", line, err)
	}
	cl.CloseConn() // the client reconnects and meets the fake socket
	// It must end up connected over the attach stream; had it trusted the
	// fake, it would stay "local" and this wait would time out.
	deadline := time.Now().Add(10 * time.Second)
	for !cl.Connected() || cl.Local() {
		if time.Now().After(deadline) {
			t.Fatalf("after the socket was replaced: connected %v, local %v (it trusted a socket held by a process of the sandbox)", cl.Connected(), cl.Local())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out, code := run(t, m, s, `echo still-works`); out != "still-works\n" || code != 0 {
		t.Fatalf("command over the attach stream: %q %d", out, code)
	}
	if err := fp.Kill(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// A symlink in place of the socket, to the host's Docker socket: the
	// lookup stays inside the sandbox's root and finds no socket there.
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skipf("no host Docker socket to aim at: %v", err)
	}
	if out, code := run(t, m, s, `rm -f /run/sandboxctl/supervisor.sock && ln -s /var/run/docker.sock /run/sandboxctl/supervisor.sock && echo linked`); out != "linked\n" || code != 0 {
		t.Fatalf("symlink: %q %d", out, code)
	}
	insp, err := m.cli.ContainerInspect(ctxT(t), st.Ensure.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := dialSocketUnder(ctxT(t), fmt.Sprintf("/proc/%d/root", insp.Container.State.Pid))
	if err == nil {
		_ = conn.Close()
		t.Fatal("a symlink in the sandbox led the daemon to a socket outside it")
	}
	if !errors.Is(err, errNoLocalSocket) {
		t.Fatalf("symlinked socket: %v", err)
	}
}
