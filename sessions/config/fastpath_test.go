package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestParseFastPathIsCheck: Parse's one strict pass (decodeValid) gives
// the File Check gives for every valid file, and takes none Check finds a
// problem in, so the fast path never changes what a file means.
func TestParseFastPathIsCheck(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "```yaml\n")
	reference, _, _ := strings.Cut(rest, "```")
	valid := map[string]string{
		"empty":        "",
		"comment":      "# nothing\n",
		"reference":    reference,
		"overrides":    "exec:\n  host: gateway\n  security: full\n  backgroundMs: 500\nsandbox:\n  docker:\n    env: {FOO: bar}\n    pidsLimit: 64\n",
		"null section": "exec:\nsandbox:\n  docker: ~\n",
		"bench":        "exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: /tmp/ws\n  docker:\n    image: x/y:1\n    containerPrefix: p-\n",
		"anchors":      "exec: &e\n  timeoutSec: 60\n",
	}
	for name, data := range valid {
		want, problems := Check(name, []byte(data))
		if len(problems) > 0 {
			t.Fatalf("%s: not a valid file: %v", name, problems)
		}
		got, ok := decodeValid([]byte(data))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the fast path gives %v\n%+v\nCheck gives\n%+v", name, ok, got, want)
		}
	}
	invalid := []string{
		"exec: {}\nbogus: 1\n",
		"exec:\n  Host: gateway\n",
		"exec:\n  security: loose\n",
		"exec:\n  timeoutSec: soon\n",
		"exec:\n  backgroundMs: -5\n",
		"exec:\n  safeBins: head\n",
		"exec:\n  host: sandbox\n  host: gateway\n",
		"sandbox:\n  docker:\n    network: host\n",
		"exec: [1, 2]\n",
		"exec:\n  host: [unclosed\n",
	}
	for _, data := range invalid {
		if _, problems := Check("t.yaml", []byte(data)); len(problems) == 0 {
			t.Fatalf("%q: Check finds no problem", data)
		}
		if _, ok := decodeValid([]byte(data)); ok {
			t.Errorf("%q: the fast path takes a file Check refuses", data)
		}
	}
}
