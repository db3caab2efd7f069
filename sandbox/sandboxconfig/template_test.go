package sandboxconfig

import (
	"errors"
	"strings"
	"testing"
)

func TestTemplateDockerOverridesTopLevel(t *testing.T) {
	c := DefaultConfig()
	c.Templates = map[string]Template{"big": {Memory: "4g", CPUs: 2, Env: map[string]string{"X": "1"}, Image: "img:2"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := c.TemplateDocker("big")
	if err != nil {
		t.Fatal(err)
	}
	if d.Memory != "4g" || d.MemorySwap != "4g" || d.CPUs != 2 || d.Image != "img:2" || d.Env["X"] != "1" || d.Env["LANG"] != "C.UTF-8" || d.PidsLimit != 256 {
		t.Fatalf("template big: %+v", d)
	}
	if c.Docker.Env["X"] != "" {
		t.Fatal("the template's env leaked into sandbox.docker.env")
	}
	def, err := c.TemplateDocker(DefaultTemplate)
	if err != nil || def.Memory != "1g" {
		t.Fatalf("default template: %+v %v", def, err)
	}
	if _, err := c.TemplateDocker("nope"); !errors.Is(err, ErrUnknownTemplate) || !strings.Contains(err.Error(), "default, big") {
		t.Fatalf("unknown template: %v", err)
	}
}

func TestTemplateValidation(t *testing.T) {
	for _, tc := range []struct {
		tmpl map[string]Template
		want string
	}{
		{map[string]Template{"default": {}}, "sandbox.templates.default"},
		{map[string]Template{"Bad Name": {}}, "sandbox.templates.Bad Name"},
		{map[string]Template{"n": {Network: "host"}}, `sandbox.templates.n.network "host"`},
		{map[string]Template{"m": {Memory: "lots"}}, `sandbox.templates.m.memory "lots"`},
		{map[string]Template{"c": {CPUs: -1}}, "sandbox.templates.c.cpus"},
		{map[string]Template{"e": {Env: map[string]string{"AWS_SECRET_ACCESS_KEY": "x"}}}, "sandbox.templates.e.env"},
	} {
		c := DefaultConfig()
		c.Templates = tc.tmpl
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an invalid-config error naming %s", tc.tmpl, err, tc.want)
		}
	}
}

func TestObjectsRefusedWithSeveralEngines(t *testing.T) {
	engines := []EngineConfig{{Name: "a", Address: "unix:///run/a.sock"}, {Name: "b", Address: "unix:///run/b.sock"}}
	c := DefaultConfig()
	c.Engines = engines
	if err := c.Validate(); err != nil {
		t.Fatalf("two Engines alone: %v", err)
	}
	c.Explicit = true
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "sandbox.explicit") {
		t.Fatalf("explicit with two Engines: %v", err)
	}
	c.Explicit, c.Templates = false, map[string]Template{"big": {Memory: "2g"}}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "sandbox.templates") {
		t.Fatalf("templates with two Engines: %v", err)
	}
}
