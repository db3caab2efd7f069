package sandbox

import (
	"strings"
	"testing"
	"time"
)

// fullImage is the Debian sandbox image (it has perl, whose socket module
// plays the part of a hostile process inside the sandbox).
var fullImage = envOr("SANDBOXCTL_FULL_IMAGE", "sandboxctl/sandbox:bookworm")

// perlHello connects to the supervisor socket from inside the sandbox,
// sends a Hello frame and reports whether anything answered.
const perlHello = `perl -MIO::Socket::UNIX -e '
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

	if out, code := run(t, m, s, perlHello); strings.TrimSpace(out) != "refused" || code != 0 {
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
	deadline := time.Now().Add(10 * time.Second)
	for !cl.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("no reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cl.Local() {
		t.Fatal("the client trusted a socket held by a process of the sandbox")
	}
	if out, code := run(t, m, s, `echo still-works`); out != "still-works\n" || code != 0 {
		t.Fatalf("command over the attach stream: %q %d", out, code)
	}
	if err := fp.Kill(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
