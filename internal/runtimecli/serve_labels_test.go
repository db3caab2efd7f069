package runtimecli

import (
	"maps"
	"strings"
	"testing"
)

// $SANDBOXCTL_SANDBOX_LABELS: free keys are taken; the sandboxctl.* keys that
// name a sandbox's owner and config are refused by name (a label there would
// override the owner recovery reads back), and malformed pairs too.
func TestParseSandboxLabels(t *testing.T) {
	got, err := parseSandboxLabels("org.testcontainers=true,org.testcontainers.sessionId=abc,sandboxctl.testcontainers.run=r1,sandboxctl.test=x")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"org.testcontainers": "true", "org.testcontainers.sessionId": "abc",
		"sandboxctl.testcontainers.run": "r1", "sandboxctl.test": "x"}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, err := parseSandboxLabels("  "); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	for in, name := range map[string]string{
		"sandboxctl.agentId=mallory": "sandboxctl.agentId",
		"sandboxctl.stateId=x":       "sandboxctl.stateId",
		"a=1,novalue":                "novalue",
		"=v":                         "=v",
	} {
		if _, err := parseSandboxLabels(in); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%q: error %v, want one naming %q", in, err, name)
		}
	}
}
