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

// perlFakeSupervisor tries to stand in for the supervisor: to replace its
// socket with one of its own, or to add a socket beside it. Each attempt
// prints its errno ("ok" had it worked).
const perlFakeSupervisor = `perl -MIO::Socket::UNIX -e '
my $p = "/run/sandboxctl/supervisor.sock";
print "unlink: ", (unlink($p) ? "ok" : "$!"), "\n";
for my $q ($p, "/run/sandboxctl/fake.sock") {
  my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $q, Listen => 5);
  print "listen: ", ($s ? "ok" : "$!"), "\n";
}'`

// TestSupervisedLocalSocket: a root daemon on the Engine's host talks to the
// supervisor over its socket; a process inside the sandbox can neither use
// that socket nor replace it to impersonate the supervisor (the socket's
// directory is the supervisor uid's), and the daemon does not follow a
// symlink planted in its place out of the sandbox.
func TestSupervisedLocalSocket(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Docker.Image = fullImage })
	s := Scope{AgentID: "sock"}
	st := startCmd(t, m, s, `echo hi`, nil)
	if out, _, code, _ := drain(t, mustSupervised(t, st)); out != "hi\n" || code != 0 {
		t.Fatalf("first command: %q %d", out, code)
	}
	cl, err := m.first().supervisorClient(ctxT(t), st.Ensure.ID)
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

	// Nor stand in for the supervisor: the socket's directory is the
	// supervisor uid's, so a command can neither replace the socket nor
	// bind one beside it.
	const denied = "unlink: Permission denied\nlisten: Permission denied\nlisten: Permission denied\n"
	if out, code := run(t, m, s, perlFakeSupervisor); out != denied || code != 0 {
		t.Fatalf("a process in the sandbox tried to replace the supervisor's socket: %q (exit %d), want %q", out, code, denied)
	}
	// The daemon reconnects and still finds the real supervisor on its
	// socket.
	cl.CloseConn()
	deadline := time.Now().Add(10 * time.Second)
	for !cl.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("the client did not reconnect: %v", cl.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !cl.Local() {
		t.Fatal("reconnected over the attach stream although the supervisor's socket is intact")
	}
	if out, code := run(t, m, s, `echo still-works`); out != "still-works\n" || code != 0 {
		t.Fatalf("command after the reconnect: %q %d", out, code)
	}
	if !cl.Local() || cl.Err() != nil {
		t.Fatalf("after the reconnect: local %v err %v", cl.Local(), cl.Err())
	}

	// A symlink in place of the socket, to the host's Docker socket (planted
	// from the host: a command cannot write there; this checks the daemon's
	// own lookup): the lookup stays inside the sandbox's root and finds no
	// socket there.
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skipf("no host Docker socket to aim at: %v", err)
	}
	insp, err := m.first().cli.ContainerInspect(ctxT(t), st.Ensure.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := fmt.Sprintf("/proc/%d/root", insp.Container.State.Pid)
	sock := root + "/run/sandboxctl/supervisor.sock"
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/var/run/docker.sock", sock); err != nil {
		t.Fatal(err)
	}
	conn, err := dialSocketUnder(ctxT(t), root)
	if err == nil {
		_ = conn.Close()
		t.Fatal("a symlink in the sandbox led the daemon to a socket outside it")
	}
	if !errors.Is(err, errNoLocalSocket) {
		t.Fatalf("symlinked socket: %v", err)
	}
}
