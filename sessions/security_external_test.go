package sessions_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// TestSecurityExternalDirectorySymlinkFlipDirectPath replays issue 12 item 9
// on the gateway's direct path (no host supervisor: the daemon forks the
// command itself), with the real sandboxctld as the confining launcher: a
// concurrent writer flips the workspace symlink `link` between a file
// inside and a secret outside while the allowlisted `cat link` runs 100
// times. (integration.TestSecurityExternalDirectorySymlinkFlip replays it
// through a real daemon and its host supervisor.)
func TestSecurityExternalDirectorySymlinkFlipDirectPath(t *testing.T) {
	bins, err := testbuild.Build(t.TempDir(), "sandboxctld")
	if err != nil {
		t.Fatal(err)
	}
	ws, outside := t.TempDir(), t.TempDir()
	const secretText, insideText = "TOP-SECRET-direct", "inside-direct"
	secret, inside := filepath.Join(outside, "secret"), filepath.Join(ws, "inside.txt")
	for p, s := range map[string]string{secret: secretText, inside: insideText} {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{Shell: "/bin/sh", Launcher: bins[0], Logf: t.Logf,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := guard.OpenStore(filepath.Join(t.TempDir(), "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddAllowlist(context.Background(), "", "cat"); err != nil {
		t.Fatal(err)
	}
	gate := &guard.Gate{Store: store, Config: guard.GateConfig{
		Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, AskFallback: vocab.SecurityDeny, Workspace: ws}}
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "allowlist", "off"
	m, err := sessions.New(sessions.Options{
		Config: cfg,
		Hosts:  map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(r, ws)},
		Guard:  sessions.NewGateGuard(gate, r),
		Logf:   t.Logf, Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	link := filepath.Join(ws, "link")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := filepath.Join(ws, ".link.tmp")
		for i := 0; ctx.Err() == nil; i++ {
			target := inside
			if i%2 == 0 {
				target = secret
			}
			_ = os.Remove(tmp)
			if os.Symlink(target, tmp) == nil {
				_ = os.Rename(tmp, link)
			}
		}
	}()
	// 100 tries at least, and more (up to 2000) until one printed the
	// inside file: on a busy machine the flips may win every early try,
	// and a test whose every try was denied proves nothing.
	tries := 0
	leaked, printed, denied, refused := 0, 0, 0, 0
	var firstLeak, other string
	for ; tries < 100 || printed == 0 && tries < 2000; tries++ {
		res, err := m.Exec(context.Background(), api.ExecParams{Command: "cat link", YieldMs: new(float64(20000))})
		if err != nil {
			t.Fatal(err)
		}
		text := firstText(res)
		switch {
		case strings.Contains(text, secretText):
			leaked++
			if firstLeak == "" {
				firstLeak = fmt.Sprintf("%v %q", res.Details, text)
			}
		case res.Details.Status == api.StatusDenied:
			denied++
		case strings.Contains(text, insideText):
			printed++
		case strings.Contains(text, "link: Permission denied"):
			refused++
		default:
			other = fmt.Sprintf("%v %q", res.Details, text)
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d tries: %d printed the inside file, %d denied by the check, %d refused by the kernel at open, %d leaked the secret",
		tries, printed, denied, refused, leaked)
	if leaked > 0 {
		t.Fatalf("ATTACK WORKED: the secret outside the workspace was printed in %d of %d tries; first: %s", leaked, tries, firstLeak)
	}
	if other != "" {
		t.Fatalf("a try ended otherwise: %s", other)
	}
	if printed == 0 {
		t.Fatalf("no try printed the inside file (%d denied): the test proves nothing", denied)
	}
}
