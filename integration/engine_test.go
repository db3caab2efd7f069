package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// ownEngine is a dockerd of the test's own, beside the main one, so that a
// test may stop and restart it: its own data and exec roots, socket, pid
// file and containerd namespaces, no bridge and no iptables.
type ownEngine struct {
	dir  string
	host string // unix://…
	args []string
	cmd  *exec.Cmd
	cli  *client.Client
}

// startOwnEngine starts a dockerd and loads images from the main Engine
// into it. Everything it made is removed at the end of the test.
func startOwnEngine(t *testing.T, images ...string) *ownEngine {
	t.Helper()
	requireDocker(t, images...)
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Fatalf("dockerd not installed: %v", err)
	}
	// Short: the socket path must fit a sockaddr_un.
	dir, err := os.MkdirTemp("/tmp", "sbxf-")
	if err != nil {
		t.Fatal(err)
	}
	ns := filepath.Base(dir)
	e := &ownEngine{dir: dir, host: "unix://" + filepath.Join(dir, "d.sock")}
	e.args = []string{
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"-H", e.host, "--pidfile", filepath.Join(dir, "d.pid"),
		"--bridge=none", "--iptables=false", "--ip6tables=false",
		"--containerd-namespace", ns, "--containerd-plugins-namespace", ns + "-plugins",
	}
	t.Cleanup(func() { e.destroy(t) })
	e.start(t)
	if e.cli, err = client.New(client.WithHost(e.host)); err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		load := exec.Command("sh", "-c", `docker save "$1" | docker -H "$2" load -q`, "sh", img, e.host)
		if out, err := load.CombinedOutput(); err != nil {
			t.Fatalf("load %s into the test's dockerd: %v\n%s", img, err, out)
		}
	}
	return e
}

// env points a process at this Engine.
func (e *ownEngine) env() []string { return []string{"DOCKER_HOST=" + e.host} }

// start launches dockerd and waits until it answers.
func (e *ownEngine) start(t *testing.T) time.Duration {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	began := time.Now()
	e.cmd = exec.Command("dockerd", e.args...)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cli, err := client.New(client.WithHost(e.host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
		if err == nil {
			return time.Since(began)
		}
		if time.Since(began) > 60*time.Second {
			log, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
			t.Fatalf("the test's dockerd did not answer within 60 s: %v\n%s", err, lastBytes(log, 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends dockerd gracefully (its containers stop with it: no
// live-restore) and waits for it.
func (e *ownEngine) stop(t *testing.T) {
	t.Helper()
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Errorf("the test's dockerd did not stop on SIGTERM within 60 s")
	}
	e.cmd = nil
}

// destroy removes every container of this Engine, stops it and removes
// its directories.
func (e *ownEngine) destroy(t *testing.T) {
	if e.cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if cli, err := client.New(client.WithHost(e.host)); err == nil {
			if list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true}); err == nil {
				for _, c := range list.Items {
					_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
				}
			}
			cli.Close()
		}
		cancel()
		e.stop(t)
	}
	if e.cli != nil {
		e.cli.Close()
	}
	if err := os.RemoveAll(e.dir); err != nil {
		t.Logf("remove %s: %v", e.dir, err)
	}
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
