package config

import (
	"fmt"
	"testing"
)

// TestCheckReportsEveryProblem: one pass over a file with several
// problems names each of them with its key and line, not only the first:
// unknown keys (top level and nested), values of the wrong type, bad
// enumerations and ranges.
func TestCheckReportsEveryProblem(t *testing.T) {
	doc := `exec:
  host: moon
  backgroundMs: 10s
  bogus: 1
  timeoutSec: -5
sandbox:
  scope: galaxy
  docker:
    pidsLimit: many
    colour: blue
limits:
  sessions:
    running: 0
extra: true
`
	_, problems := Check("c.yaml", []byte(doc))
	want := map[string]int{
		"exec.host":                2,
		"exec.backgroundMs":        3,
		"exec.bogus":               4,
		"exec.timeoutSec":          5,
		"sandbox.scope":            7,
		"sandbox.docker.pidsLimit": 9,
		"sandbox.docker.colour":    10,
		"limits.sessions.running":  13,
		"extra":                    14,
	}
	got := map[string]int{}
	for _, p := range problems {
		got[p.Key] = p.Line
		if p.File != "c.yaml" {
			t.Errorf("%v: file %q", p, p.File)
		}
	}
	for k, line := range want {
		if l, ok := got[k]; !ok || l != line {
			t.Errorf("problem of %s: line %d (reported %v), want line %d", k, l, ok, line)
		}
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(problems), len(want), fmt.Sprint(problems))
	}
	// Parse keeps returning the first, and nothing of the file.
	if _, err := Parse("c.yaml", []byte(doc)); err == nil || err.Error() != problems[0].Error() {
		t.Errorf("Parse: %v, want the first problem %v", err, problems[0])
	}
}

func TestCheckGoodFile(t *testing.T) {
	f, problems := Check("c.yaml", []byte("exec:\n  host: gateway\n  timeoutSec: 60\n"))
	if len(problems) != 0 || f.Exec.TimeoutSec != 60 {
		t.Fatalf("problems %v, timeout %d", problems, f.Exec.TimeoutSec)
	}
}
