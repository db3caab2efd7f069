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
