package config_test

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// TestReferenceIsTheDefaults keeps docs/configuration.md honest: its YAML block
// names every key (an unknown key fails to parse) with the default value the
// code uses, so the reference cannot drift from the loader.
func TestReferenceIsTheDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	if !ok {
		t.Fatal("docs/configuration.md has no ```yaml block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/configuration.md: the ```yaml block is not closed")
	}
	got, err := config.Parse("docs/configuration.md", []byte(block))
	if err != nil {
		t.Fatalf("the reference does not load: %v", err)
	}
	// Compared in their YAML form, where an empty list and an absent one agree.
	want, _ := yaml.Marshal(config.Default())
	have, _ := yaml.Marshal(got)
	if string(want) != string(have) {
		t.Errorf("docs/configuration.md differs from config.Default():\ncode:\n%s\ndoc:\n%s", want, have)
	}
	// Parse fills defaults for absent keys, so equality alone would not catch a
	// key missing from the reference: every leaf of the defaults must be named.
	for _, key := range leafKeys(t, config.Default()) {
		if !strings.Contains(block, key+":") {
			t.Errorf("docs/configuration.md does not name the key %q", key)
		}
	}
}

// leafKeys lists the mapping keys of v's YAML form (each key once).
func leafKeys(t *testing.T, v any) []string {
	t.Helper()
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				seen[n.Content[i].Value] = true
				walk(n.Content[i+1])
			}
		}
		for _, c := range n.Content {
			if n.Kind != yaml.MappingNode {
				walk(c)
			}
		}
	}
	walk(&n)
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	return keys
}
