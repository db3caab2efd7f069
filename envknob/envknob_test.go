package envknob

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestKnobsDocumented keeps docs/configuration.md's table of environment
// variables equal to All: every knob with its alias, and no other row.
func TestKnobsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Environment variables\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Environment variables" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| (?:`([A-Z_]+)`)? \\|")
	documented := map[Knob]Knob{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented[Knob(m[1])] = Knob(m[2])
	}
	for _, in := range All() {
		alias, ok := documented[in.Knob]
		switch {
		case !ok:
			t.Errorf("%s is not in docs/configuration.md's environment table", in.Knob)
		case alias != in.Alias:
			t.Errorf("%s: the docs name the alias %q, envknob %q", in.Knob, alias, in.Alias)
		}
		delete(documented, in.Knob)
		if in.Doc == "" {
			t.Errorf("%s has no Doc", in.Knob)
		}
	}
	for k := range documented {
		t.Errorf("docs/configuration.md documents %s, which envknob does not declare", k)
	}
}

func TestGetAlias(t *testing.T) {
	env := map[string]string{"PI_BASH_YIELD_MS": "50"}
	if v, from := YieldMs.GetFrom(func(k string) string { return env[k] }); v != "50" || from != YieldMsAlias {
		t.Errorf("YieldMs.Get = %q from %s, want 50 from the alias", v, from)
	}
	env["SANDBOXCTL_YIELD_MS"] = "70"
	if v, from := YieldMs.GetFrom(func(k string) string { return env[k] }); v != "70" || from != YieldMs {
		t.Errorf("YieldMs.Get = %q from %s, want 70 from SANDBOXCTL_YIELD_MS", v, from)
	}
	if v := State.Get(func(k string) string { return env[k] }); v != "" {
		t.Errorf("State.Get = %q, want empty", v)
	}
}
