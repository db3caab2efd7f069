package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestPlaceMostFreeCapacity(t *testing.T) {
	const gib = int64(1) << 30
	mk := func(name string, healthy, imageOK bool, count int, memTotal int64, maxSb int, memCap int64) *member {
		return &member{eng: Engine{Name: name, MaxSandboxes: maxSb, MemoryBytes: memCap},
			checked: true, healthy: healthy, imageOK: imageOK, count: count, memTotal: memTotal}
	}
	for _, tc := range []struct {
		name    string
		members []*member
		want    string // "" : none fits
		why     string
	}{
		{"most free memory", []*member{mk("a", true, true, 2, 8*gib, 0, 0), mk("b", true, true, 2, 16*gib, 0, 0)}, "b", ""},
		{"configured cap beats Engine memory", []*member{mk("a", true, true, 0, 64*gib, 0, 2*gib), mk("b", true, true, 3, 8*gib, 0, 0)}, "b", ""},
		{"ties: fewest sandboxes", []*member{mk("a", true, true, 3, 0, 0, 0), mk("b", true, true, 1, 0, 0, 0)}, "b", ""},
		{"ties: first configured", []*member{mk("a", true, true, 1, 8*gib, 0, 0), mk("b", true, true, 1, 8*gib, 0, 0)}, "a", ""},
		{"down Engine takes none", []*member{mk("a", false, true, 0, 64*gib, 0, 0), mk("b", true, true, 5, 8*gib, 0, 0)}, "b", ""},
		{"missing image", []*member{mk("a", true, false, 0, 64*gib, 0, 0), mk("b", true, true, 5, 8*gib, 0, 0)}, "b", ""},
		{"maxSandboxes", []*member{mk("a", true, true, 4, 64*gib, 4, 0), mk("b", true, true, 5, 8*gib, 0, 0)}, "b", ""},
		{"all full", []*member{mk("a", true, true, 4, 64*gib, 4, 0), mk("b", true, true, 2, 0, 0, 2*gib)}, "", "a: at maxSandboxes 4; b: memory cap reached"},
		{"all down", []*member{mk("a", false, true, 0, 0, 0, 0)}, "", "a: down"},
		{"runtime missing", []*member{withNoRuntime(mk("a", true, true, 0, 64*gib, 0, 0), "runsc"), mk("b", true, true, 5, 8*gib, 0, 0)}, "b", ""},
		{"runtime missing where not full", []*member{withNoRuntime(mk("a", true, true, 0, 64*gib, 0, 0), "runsc"), mk("b", true, true, 4, 8*gib, 4, 0)}, "", `a: no runtime "runsc"; b: at maxSandboxes 4`},
	} {
		f := &fleet{members: tc.members}
		got, err := f.place(gib)
		switch {
		case tc.want == "" && (err == nil || !errors.Is(err, ErrNoCapacity) || !errors.Is(err, ErrEngineDown) || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("%s: err = %v, want ErrNoCapacity saying %q", tc.name, err, tc.why)
		case tc.want != "" && (err != nil || got.eng.Name != tc.want):
			t.Errorf("%s: placed on %v (%v), want %s", tc.name, got, err, tc.want)
		}
	}
}

// A runtime no answering Engine has is a config error, not a wait.
func TestPlaceRuntimeNowhere(t *testing.T) {
	down := &member{eng: Engine{Name: "c"}, checked: true}
	f := &fleet{members: []*member{
		{eng: Engine{Name: "a"}, checked: true, healthy: true, imageOK: true, noRuntime: "runsc"},
		{eng: Engine{Name: "b"}, checked: true, healthy: true, imageOK: true, noRuntime: "runsc"}, down,
	}}
	_, err := f.place(0)
	if !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNoCapacity) ||
		!strings.Contains(err.Error(), "sandbox.docker.runtime") || !strings.Contains(err.Error(), `b: no runtime "runsc"`) {
		t.Fatalf("place = %v, want a config error naming the runtime and each Engine", err)
	}
}

func withNoRuntime(mb *member, rt string) *member {
	mb.noRuntime = rt
	return mb
}

func TestMissingRuntime(t *testing.T) {
	has := map[string]struct{}{"runc": {}, "runsc": {}}
	for _, tc := range []struct{ want, missing string }{{"", ""}, {"runc", ""}, {"runsc", ""}, {"kata", "kata"}} {
		if got := missingRuntime(tc.want, has); got != tc.missing {
			t.Errorf("missingRuntime(%q) = %q, want %q", tc.want, got, tc.missing)
		}
	}
}
