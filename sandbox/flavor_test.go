package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// fixedRlimits stands for this process's limits.
func fixedRlimits(resource int) (unix.Rlimit, error) {
	switch resource {
	case unix.RLIMIT_NOFILE:
		return unix.Rlimit{Cur: 1024, Max: 20000}, nil
	case unix.RLIMIT_NPROC:
		return unix.Rlimit{Cur: 96364, Max: 96364}, nil
	}
	return unix.Rlimit{}, errors.New("unexpected resource")
}

func TestAdaptForPodmanTmpfsOwner(t *testing.T) {
	hc := &container.HostConfig{Tmpfs: map[string]string{
		"/run": "rw,noexec,size=16m,uid=1000,gid=1000",
		"/tmp": "rw,size=256m",
	}}
	if err := adaptForPodman(hc, fixedRlimits); err != nil {
		t.Fatal(err)
	}
	if got := hc.Tmpfs["/run"]; got != "rw,noexec,size=16m,U" {
		t.Errorf("/run = %q, want the owner as U", got)
	}
	if got := hc.Tmpfs["/tmp"]; got != "rw,size=256m" {
		t.Errorf("/tmp = %q, want it unchanged", got)
	}
}

func TestAdaptForPodmanUlimits(t *testing.T) {
	hc := &container.HostConfig{}
	if err := adaptForPodman(hc, fixedRlimits); err != nil {
		t.Fatal(err)
	}
	got := map[string]units.Ulimit{}
	for _, u := range hc.Ulimits {
		got[u.Name] = *u
	}
	if want := (units.Ulimit{Name: "nofile", Soft: 1024, Hard: 20000}); got["nofile"] != want {
		t.Errorf("nofile = %+v, want %+v (this process's limits)", got["nofile"], want)
	}
	if want := (units.Ulimit{Name: "nproc", Soft: 96364, Hard: 96364}); got["nproc"] != want {
		t.Errorf("nproc = %+v, want %+v (this process's limits)", got["nproc"], want)
	}

	// A configured ulimit stands; only the missing one is added.
	hc = &container.HostConfig{Resources: container.Resources{Ulimits: []*units.Ulimit{{Name: "nproc", Soft: 64, Hard: 64}}}}
	if err := adaptForPodman(hc, fixedRlimits); err != nil {
		t.Fatal(err)
	}
	if len(hc.Ulimits) != 2 || *hc.Ulimits[0] != (units.Ulimit{Name: "nproc", Soft: 64, Hard: 64}) || hc.Ulimits[1].Name != "nofile" {
		t.Errorf("ulimits = %v, want the configured nproc kept and nofile added", hc.Ulimits)
	}

	// Unbounded limits leave Podman's default.
	hc = &container.HostConfig{}
	adaptForPodman(hc, func(int) (unix.Rlimit, error) {
		return unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, nil
	})
	if len(hc.Ulimits) != 0 {
		t.Errorf("ulimits = %v, want none for unlimited limits", hc.Ulimits)
	}
}

// Podman 4.3's compatible API runs its default runtime whatever
// HostConfig.Runtime says: a configured runtime (gVisor) is refused rather
// than silently dropped.
func TestAdaptForPodmanRefusesRuntime(t *testing.T) {
	hc := &container.HostConfig{Runtime: "runsc"}
	err := adaptForPodman(hc, fixedRlimits)
	if !errors.Is(err, sandboxconfig.ErrInvalidConfig) || !strings.Contains(err.Error(), "sandbox.docker.runtime") {
		t.Fatalf("err = %v, want an invalid sandbox.docker.runtime", err)
	}
}
