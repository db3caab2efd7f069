package sandbox

import (
	"testing"

	"github.com/moby/moby/api/types/container"
)

func TestAdaptForPodmanTmpfsOwner(t *testing.T) {
	hc := &container.HostConfig{Tmpfs: map[string]string{
		"/run": "rw,noexec,size=16m,uid=1000,gid=1000",
		"/tmp": "rw,size=256m",
	}}
	adaptForPodman(hc)
	if got := hc.Tmpfs["/run"]; got != "rw,noexec,size=16m,U" {
		t.Errorf("/run = %q, want the owner as U", got)
	}
	if got := hc.Tmpfs["/tmp"]; got != "rw,size=256m" {
		t.Errorf("/tmp = %q, want it unchanged", got)
	}
}
