package sandboxconfig

import (
	"errors"

	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/workdir"
)

const allowAllSeccomp = `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}`

func TestUnsafeRefusals(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		field  string // "" = accepted
	}{
		{"defaults", func(*Config) {}, ""},
		{"capDrop empty", func(c *Config) { c.Docker.CapDrop = []string{} }, "sandbox.docker.capDrop"},
		{"capDrop empty, allowed", func(c *Config) {
			c.Docker.CapDrop = []string{}
			c.Docker.Unsafe.AllowCapabilities = []string{"ALL"}
		}, ""},
		{"capDrop some, rest not allowed", func(c *Config) {
			c.Docker.CapDrop = []string{"NET_RAW"}
			c.Docker.Unsafe.AllowCapabilities = []string{"CHOWN"}
		}, "sandbox.docker.capDrop"},
		{"capDrop all but allowed", func(c *Config) {
			c.Docker.CapDrop = []string{"AUDIT_WRITE", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
			c.Docker.Unsafe.AllowCapabilities = []string{"cap_chown"}
		}, ""},
		{"unknown capability", func(c *Config) { c.Docker.CapDrop = []string{"ALL", "FLY"} }, "sandbox.docker.capDrop"},
		{"seccomp allow-all JSON", func(c *Config) { c.Docker.SeccompProfile = allowAllSeccomp }, "sandbox.docker.seccompProfile"},
		{"seccomp log-all JSON", func(c *Config) { c.Docker.SeccompProfile = `{"defaultAction":"SCMP_ACT_LOG"}` }, "sandbox.docker.seccompProfile"},
		{"seccomp allow-all JSON, allowed", func(c *Config) {
			c.Docker.SeccompProfile = allowAllSeccomp
			c.Docker.Unsafe.SeccompUnconfined = true
		}, ""},
		{"seccomp unconfined", func(c *Config) { c.Docker.SeccompProfile = "unconfined" }, "sandbox.docker.seccompProfile"},
		{"seccomp unconfined, allowed", func(c *Config) {
			c.Docker.SeccompProfile = "unconfined"
			c.Docker.Unsafe.SeccompUnconfined = true
		}, ""},
		{"seccomp errno but unshare allowed", func(c *Config) {
			c.Docker.SeccompProfile = `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","unshare"],"action":"SCMP_ACT_ALLOW"}]}`
		}, "sandbox.docker.seccompProfile"},
		{"seccomp errno, plain syscalls", func(c *Config) {
			c.Docker.SeccompProfile = `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","write","exit_group"],"action":"SCMP_ACT_ALLOW"}]}`
		}, ""},
		{"seccomp mount only with a dropped capability", func(c *Config) {
			c.Docker.SeccompProfile = `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["mount"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_ADMIN"]}}]}`
		}, ""},
		{"seccomp as a path", func(c *Config) { c.Docker.SeccompProfile = "/etc/seccomp.json" }, "sandbox.docker.seccompProfile"},
		{"seccomp bad JSON", func(c *Config) { c.Docker.SeccompProfile = `{"defaultAction":` }, "sandbox.docker.seccompProfile"},
		{"apparmor unconfined", func(c *Config) { c.Docker.ApparmorProfile = "unconfined" }, "sandbox.docker.apparmorProfile"},
		{"apparmor unconfined, allowed", func(c *Config) {
			c.Docker.ApparmorProfile = "unconfined"
			c.Docker.Unsafe.ApparmorUnconfined = true
		}, ""},
		{"bind /var/lib/docker", func(c *Config) { c.Docker.Binds = []string{"/var/lib/docker:/d:ro"} }, "sandbox.docker.binds[0]"},
		{"bind /var/lib/containerd", func(c *Config) { c.Docker.Binds = []string{"/var/lib/containerd:/c"} }, "sandbox.docker.binds[0]"},
		{"bind /usr", func(c *Config) { c.Docker.Binds = []string{"/usr:/hostusr"} }, "sandbox.docker.binds[0]"},
		{"bind /var/spool/cron", func(c *Config) { c.Docker.Binds = []string{"/var/spool/cron:/cron"} }, "sandbox.docker.binds[0]"},
		{"bind /var (holds the Engine's state)", func(c *Config) { c.Docker.Binds = []string{"/var:/v:ro"} }, "sandbox.docker.binds[0]"},
		{"bind /usr, allowed", func(c *Config) {
			c.Docker.Binds = []string{"/usr:/hostusr:ro"}
			c.Docker.Unsafe.BindSensitive = []string{"/usr"}
		}, ""},
		{"bind the state dir", func(c *Config) { c.Docker.Binds = []string{state + ":/s"} }, "sandbox.docker.binds[0]"},
		{"bind under the state dir", func(c *Config) { c.Docker.Binds = []string{filepath.Join(state, "x") + ":/s"} }, "sandbox.docker.binds[0]"},
		{"bind a parent of the state dir", func(c *Config) { c.Docker.Binds = []string{filepath.Dir(state) + ":/s"} }, "sandbox.docker.binds[0]"},
		{"bind elsewhere", func(c *Config) { c.Docker.Binds = []string{t.TempDir() + ":/data"} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				err = c.CheckBinds(BindPolicy{Protected: []string{state}})
			}
			var ce *ConfigError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig)):
				t.Fatalf("got %v, want a refusal of %s", err, tc.field)
			case tc.field != "" && !strings.Contains(err.Error(), "unsafe") && !strings.Contains(err.Error(), "not a") && !strings.Contains(err.Error(), "profile"):
				t.Fatalf("refusal does not say how to proceed: %v", err)
			}
		})
	}
}

func TestParseTmpfs(t *testing.T) {
	for _, tc := range []struct {
		in, opts string
		size     int64
		bad      bool
	}{
		{"/tmp", "rw,nosuid,nodev,size=67108864,mode=1777", 64 << 20, false},
		{"/tmp:size=256m", "rw,nosuid,nodev,size=268435456,mode=1777", 256 << 20, false},
		{"/x:size=1g,mode=700,noexec", "rw,nosuid,nodev,size=1073741824,mode=700,noexec", 1 << 30, false},
		{"tmp", "", 0, true},
		{"/tmp:size=lots", "", 0, true},
		{"/tmp:size=0", "", 0, true},
		{"/tmp:uid=0", "", 0, true},
		{"/tmp:mode=999", "", 0, true},
		{"/tmp:exec=1", "", 0, true},
	} {
		got, err := ParseTmpfs("f", tc.in)
		if tc.bad != (err != nil) || (!tc.bad && (got.MountOptions() != tc.opts || got.Size != tc.size)) {
			t.Errorf("%s: %+v %v", tc.in, got, err)
		}
	}
	// A tmpfs in the workspace would hide it (and no fork or rollback
	// could put the workspace back under it): refused, saying why.
	for _, p := range []string{"/workspace", "/workspace/", "/workspace/cache:size=64m", workdir.ContainerAgent + "/x"} {
		if _, err := ParseTmpfs("f", p); err == nil || !strings.Contains(err.Error(), "reserved for the workspace") {
			t.Errorf("tmpfs %s: %v, want it refused as the workspace's", p, err)
		}
	}
	if _, err := ParseTmpfs("f", "/workspaces"); err != nil {
		t.Errorf("tmpfs /workspaces (beside the workspace): %v", err)
	}
	c := DefaultConfig()
	c.Docker.Tmpfs = []string{"/tmp", "/tmp/"}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a path given twice: %v", err)
	}
}

// Under a memory limit no tmpfs may hold the whole limit: a larger one is
// capped to the limit less TmpfsReserve; smaller ones and unlimited
// sandboxes are left alone.
func TestTmpfsCappedBelowTheMemoryLimit(t *testing.T) {
	d := DefaultConfig().Docker
	d.Memory, d.MemorySwap = "256m", "256m"
	d.Tmpfs = []string{"/tmp:size=2g", "/var/tmp:size=16m"}
	got, err := ParseTmpfsList(d)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Size != 192<<20 || got[0].Requested != 2<<30 || !strings.Contains(got[0].MountOptions(), "size=201326592,") {
		t.Errorf("/tmp over the limit: %+v %s", got[0], got[0].MountOptions())
	}
	if got[1].Size != 16<<20 || got[1].Requested != 0 {
		t.Errorf("/var/tmp under the limit: %+v", got[1])
	}
	d.Memory, d.MemorySwap = "", ""
	if got, _ := ParseTmpfsList(d); got[0].Size != 2<<30 || got[0].Requested != 0 {
		t.Errorf("no memory limit: %+v", got[0])
	}
	for _, tc := range []struct{ memory, reserve int64 }{{64 << 20, 32 << 20}, {256 << 20, 64 << 20}, {1 << 30, 256 << 20}, {40 << 20, 20 << 20}} {
		if got := TmpfsReserve(tc.memory); got != tc.reserve {
			t.Errorf("TmpfsReserve(%d MiB) = %d MiB, want %d MiB", tc.memory>>20, got>>20, tc.reserve>>20)
		}
	}
}

func TestEffectiveUser(t *testing.T) {
	for _, tc := range []struct {
		configured string
		uid, gid   int
		want       string
	}{
		{"", 0, 0, DefaultUser},
		{"", 1001, 1002, "1001:1002"},
		{"root", 0, 0, "root"},
		{"2000:2000", 1000, 1000, "2000:2000"},
	} {
		if got := EffectiveUser(tc.configured, tc.uid, tc.gid); got != tc.want {
			t.Errorf("EffectiveUser(%q, %d, %d) = %q, want %q", tc.configured, tc.uid, tc.gid, got, tc.want)
		}
	}
}
