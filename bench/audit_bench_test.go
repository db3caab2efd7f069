package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// BenchmarkAudit is the cost of the audit log on the exec path: warm exec
// `true` in one supervised sandbox (runc) through sessions.Manager, 8 at
// once, with and without the audit log in the same run (rounds
// alternate, so a loaded machine weighs on both alike), and the bytes per
// record:
//
//	go test -run '^$' -bench Audit -benchtime 1x ./bench/
func BenchmarkAudit(b *testing.B) {
	if b.N > 1 {
		b.Skip("one pass is the measurement; use -benchtime 1x")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cli := dockertest.Require(b, benchImage)
	dir := b.TempDir()
	_, supBin := buildBinaries(b, dir)
	prefix := "sbxaudit-" + randHex(3) + "-"
	defer func() {
		c2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel2()
		list, _ := cli.ContainerList(c2, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)})
		for _, c := range list.Items {
			_, _ = cli.ContainerRemove(c2, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}()
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "sandbox", "full", "off"
	cfg.Sandbox.Docker.Image = benchImage
	cfg.Sandbox.Docker.ContainerPrefix = prefix
	cfg.Sandbox.WorkspaceRoot = filepath.Join(dir, "ws")
	m, err := sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: filepath.Join(dir, "state"), SupervisorBinary: supBin, Client: cli})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	hosts := map[vocab.Host]sessions.Host{vocab.HostSandbox: sessions.NewSandboxHost(m)}
	plain, err := sessions.New(sessions.Options{Config: cfg, Hosts: hosts})
	if err != nil {
		b.Fatal(err)
	}
	auditDir := filepath.Join(dir, "audit")
	log, err := audit.Open(auditDir, audit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	audited, err := sessions.New(sessions.Options{Config: cfg, Hosts: hosts, Audit: log})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		c2, c := context.WithTimeout(context.Background(), time.Minute)
		defer c()
		_ = plain.Close(c2)
		_ = audited.Close(c2)
	}()
	warmTrue := func(sm *sessions.Manager) func() error {
		return func() error {
			r, err := sm.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox", AgentID: "agent-1", Security: "full", Ask: "off"})
			if err == nil && r.Details.Status != api.StatusCompleted {
				err = fmt.Errorf("result %+v", r)
			}
			return err
		}
	}
	for range 10 {
		_ = warmTrue(plain)()
		_ = warmTrue(audited)()
	}
	const rounds, perRound = 6, 200
	var off, on float64
	for i := range rounds {
		// Which goes first alternates too.
		if i%2 == 0 {
			off += rate(b, 8, perRound, warmTrue(plain))
			on += rate(b, 8, perRound, warmTrue(audited))
		} else {
			on += rate(b, 8, perRound, warmTrue(audited))
			off += rate(b, 8, perRound, warmTrue(plain))
		}
	}
	off, on = off/rounds, on/rounds
	offMed := median(sample(b, 60, warmTrue(plain)))
	onMed := median(sample(b, 60, warmTrue(audited)))
	_ = log.Close()
	rep, err := audit.Verify(auditDir, nil, false)
	if err != nil || rep.Problem != nil {
		b.Fatalf("verify: %+v %v", rep, err)
	}
	var size int64
	ents, _ := os.ReadDir(auditDir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
	}
	added := (off - on) / off * 100
	fmt.Printf("\nwarm exec `true`, 8 at once: %.0f cmds/s without the audit log, %.0f with it: %.1f%% fewer (%s)\n",
		off, on, added, check(added <= 5, "≤ 5 %"))
	fmt.Printf("warm exec `true`, one at a time (median): %s without, %s with\n", ms(offMed), ms(onMed))
	fmt.Printf("audit log: %d records, %.0f bytes per record, %.1f records per exec\n\n",
		rep.Records, float64(size)/float64(rep.Records), float64(rep.Records)/float64(rounds*perRound+60+10))
}
