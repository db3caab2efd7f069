package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSecurityWeakeningConfigRefused replays issue 12 item 8: configs that
// weaken the boundary (all capabilities kept, an allow-all seccomp profile
// given as JSON, binds of the Engine's state, /usr, the crontabs, the
// daemon's own state dir) are refused and no container is ever made from
// them; the same settings named under sandbox.docker.unsafe run, and then
// really are weaker (capabilities, unshare), which is why they are refused.
func TestSecurityWeakeningConfigRefused(t *testing.T) {
	requireDocker(t)
	prefix := fmt.Sprintf("sbxt-%s-", randHex(3))
	state := t.TempDir()
	for name, mutate := range map[string]func(*Config){
		"capDrop empty":      func(c *Config) { c.Docker.CapDrop = []string{} },
		"allow-all seccomp":  func(c *Config) { c.Docker.SeccompProfile = `{"defaultAction":"SCMP_ACT_ALLOW"}` },
		"bind docker state":  func(c *Config) { c.Docker.Binds = []string{"/var/lib/docker:/d:ro"} },
		"bind containerd":    func(c *Config) { c.Docker.Binds = []string{"/var/lib/containerd:/c:ro"} },
		"bind usr":           func(c *Config) { c.Docker.Binds = []string{"/usr:/hostusr"} },
		"bind cron spool":    func(c *Config) { c.Docker.Binds = []string{"/var/spool/cron:/cron"} },
		"bind daemon state":  func(c *Config) { c.Docker.Binds = []string{state + ":/state"} },
		"unconfined seccomp": func(c *Config) { c.Docker.SeccompProfile = "unconfined" },
	} {
		cfg := DefaultConfig()
		cfg.Docker.Image = testImage
		cfg.Docker.ContainerPrefix = prefix
		cfg.WorkspaceRoot = t.TempDir()
		mutate(&cfg)
		m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: state, Home: t.TempDir(),
			Labels: testLabels(testLabel+".prefix", prefix)})
		if err == nil {
			_, _, _ = m.Run(ctxT(t), Scope{AgentID: "weak"}, []string{"true"})
			_ = m.Close()
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	mgr := newTestManager(t, nil)
	list, err := mgr.first().cli.ContainerList(ctxT(t), listAllWithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("refused configs made %d containers", len(list.Items))
	}

	// Named under unsafe, the same settings run: root keeps the Engine's
	// default capabilities and may create a user namespace.
	weak := newTestManager(t, func(c *Config) {
		c.Docker.User = "0"
		c.Docker.CapDrop = []string{}
		c.Docker.SeccompProfile = `{"defaultAction":"SCMP_ACT_ALLOW"}`
		c.Docker.Unsafe = Unsafe{AllowCapabilities: []string{"ALL"}, SeccompUnconfined: true}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, code, err := weak.Run(ctx, Scope{AgentID: "weak"}, []string{"sh", "-c", "grep CapEff /proc/self/status; unshare -U -r true && echo UNSHARED"})
	if err != nil || code != 0 || !strings.Contains(out, "a80425fb") || !strings.Contains(out, "UNSHARED") {
		t.Errorf("explicitly unsafe sandbox: code %d out %q err %v (want the default capabilities and unshare working)", code, out, err)
	}
}
