package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestSSHEngine places a sandbox on an Engine reached over ssh:// (the
// Engine's own socket named in the address, the key and known hosts in the
// Engine's sshConfig): a private sshd on a loopback port with keys this
// test generates. A command runs there supervised (over the attach
// stream: an ssh Engine is remote), the sandbox is listed under its
// Engine, and closing the Manager leaves no ssh process behind.
func TestSSHEngine(t *testing.T) {
	requireDocker(t)
	const sshd = "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("%s: %v (scripts/toolchain.sh installs openssh-server)", sshd, err)
	}
	for _, tool := range []string{"ssh", "ssh-keygen", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	// The Engine's socket on "the remote host" (this one): the test's Engine.
	env, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	engineSock, ok := strings.CutPrefix(env.DaemonHost(), "unix://")
	_ = env.Close()
	if !ok {
		t.Fatalf("the test Engine %s is not a unix socket", env.DaemonHost())
	}

	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	for _, key := range []string{"host_key", "client_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sbxtest", "-f", file(key)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %s: %v\n%s", key, err, out)
		}
	}
	clientPub, err := os.ReadFile(file("client_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostPub, err := os.ReadFile(file("host_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(file(name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("authorized_keys", string(clientPub))
	write("sshd_config", fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
`, port, file("host_key"), file("authorized_keys"), file("sshd.pid")))
	write("known_hosts", fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub))
	write("ssh_config", fmt.Sprintf(`Host *
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  StrictHostKeyChecking yes
  BatchMode yes
`, file("client_key"), file("known_hosts")))
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege separation directory
		t.Fatal(err)
	}
	srv := exec.Command(sshd, "-D", "-e", "-f", file("sshd_config"))
	var srvLog strings.Builder
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	srvDone := make(chan struct{})
	stopSSHD := func() {
		_ = srv.Process.Kill()
		select {
		case <-srvDone:
		default:
			_ = srv.Wait()
			close(srvDone)
		}
	}
	t.Cleanup(func() {
		stopSSHD()
		if t.Failed() {
			t.Logf("sshd log:\n%s", srvLog.String())
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not answer on port %d: %v", port, err)
		}
	}

	cfg := DefaultConfig()
	cfg.Docker.Image = testImage
	cfg.Docker.ContainerPrefix = fmt.Sprintf("sbxt-%s-", randHex(3))
	cfg.WorkspaceRoot = t.TempDir()
	address := fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, engineSock)
	cfg.Engines = []sandboxconfig.EngineConfig{{Name: "viassh", Address: address, SSHConfig: file("ssh_config")}}
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir(), Labels: testLabels(),
		EngineHealthInterval: 500 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewManager with %s: %v", address, err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = m.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := m.Start(ctx, Scope{AgentID: "over-ssh"}, ExecOptions{Cmd: []string{"sh", "-c", "echo ran-over-ssh; exit 4"}, Tag: "run-ssh"})
	if err != nil {
		t.Fatalf("a command on the ssh Engine: %v", err)
	}
	if _, ok := st.Process.(*SupervisedExec); !ok {
		t.Errorf("the sandbox on the ssh Engine is not supervised: %v", st.Warnings)
	}
	if st.Ensure.Engine != "viassh" {
		t.Errorf("placed on %q, want viassh", st.Ensure.Engine)
	}
	out, _, code, werr := drainErr(t, st.Process)
	if werr != nil || code != 4 || out != "ran-over-ssh\n" {
		t.Fatalf("over ssh: out %q code %d err %v", out, code, werr)
	}
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || list[0].Engine != "viassh" || list[0].Path != "supervisor" {
		t.Fatalf("List = %+v, %v; want the one sandbox on viassh, supervised", list, err)
	}
	if err := m.Remove(ctx, Scope{AgentID: "over-ssh"}); err != nil {
		t.Fatalf("remove the sandbox: %v", err)
	}
	_ = m.Close()
	closed = true
	// Every connection was an ssh process; none outlives the Manager.
	portArg := strconv.Itoa(port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left := sshClientsTo(t, portArg)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh processes left 20 s after the Manager closed: %v", left)
		}
	}
	// And it was ssh that carried the Engine's API.
	stopSSHD()
	if !strings.Contains(srvLog.String(), "Accepted publickey for root") {
		t.Fatalf("sshd accepted no login:\n%s", srvLog.String())
	}
}

// sshClientsTo lists the ssh client processes whose arguments name port.
func sshClientsTo(t *testing.T, port string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != "ssh" {
			continue
		}
		for i, a := range args {
			if (a == "-p" && i+1 < len(args) && args[i+1] == port) || a == "-p"+port {
				out = append(out, strings.Join(args, " "))
				break
			}
		}
	}
	return out
}
