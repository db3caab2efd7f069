package sandboxconfig

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// DefaultTemplate names the template made of the top-level sandbox
// settings (sandbox.docker.*, sandbox.pool.size): what an implicit sandbox
// and a create without a template get.
const DefaultTemplate = "default"

// Template is one entry of sandbox.templates: what a sandbox created from
// it changes from the top-level sandbox.docker settings. An empty field
// keeps the top-level value; env is merged over sandbox.docker.env.
type Template struct {
	Image string  `yaml:"image" json:"image,omitempty"`
	CPUs  float64 `yaml:"cpus" json:"cpus,omitempty"`
	// Memory also sets memorySwap (no extra swap) unless that is given.
	Memory     string            `yaml:"memory" json:"memory,omitempty"`
	MemorySwap string            `yaml:"memorySwap" json:"memorySwap,omitempty"`
	PidsLimit  int64             `yaml:"pidsLimit" json:"pidsLimit,omitempty"`
	Env        map[string]string `yaml:"env" json:"env,omitempty"`
	// Network is none, bridge or a named network, as sandbox.docker.network.
	Network string `yaml:"network" json:"network,omitempty"`
	// Pool is how many started sandboxes of this template are kept ready
	// (its warm pool, as sandbox.pool.size is the default template's).
	Pool int `yaml:"pool" json:"pool,omitempty"`
}

// templateName is the shape of a template's name.
var templateName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })

// ErrUnknownTemplate means a request named a template the config does not
// define.
var ErrUnknownTemplate = errors.New("unknown sandbox template")

// TemplateNames returns the names of the templates in force, the default
// first.
func (c Config) TemplateNames() []string {
	names := make([]string, 0, len(c.Templates)+1)
	for n := range c.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	return append([]string{DefaultTemplate}, names...)
}

// TemplateDocker returns the container settings of template name ("" is
// the default template): sandbox.docker with the template's fields over it.
func (c Config) TemplateDocker(name string) (DockerConfig, error) {
	d := c.Docker
	if name == "" || name == DefaultTemplate {
		return d, nil
	}
	t, ok := c.Templates[name]
	if !ok {
		return d, fmt.Errorf("%w %q: sandbox.templates defines %s", ErrUnknownTemplate, name, strings.Join(c.TemplateNames(), ", "))
	}
	if t.Image != "" {
		d.Image = t.Image
	}
	if t.CPUs != 0 {
		d.CPUs = t.CPUs
	}
	if t.Memory != "" {
		d.Memory, d.MemorySwap = t.Memory, t.Memory
	}
	if t.MemorySwap != "" {
		d.MemorySwap = t.MemorySwap
	}
	if t.PidsLimit != 0 {
		d.PidsLimit = t.PidsLimit
	}
	if t.Network != "" {
		d.Network = t.Network
	}
	if len(t.Env) > 0 {
		env := maps.Clone(d.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, t.Env)
		d.Env = env
	}
	return d, nil
}

// validateTemplates checks every template as the config it makes; errors
// name the template's key.
func (c Config) validateTemplates() error {
	if len(c.Engines) > 1 {
		// Creating a sandbox as an object (templates, explicit) works on
		// one Engine only for now.
		if c.Explicit {
			return &ConfigError{Field: "sandbox.explicit", Value: "true", Msg: "is not supported with several Engines (sandbox.engines) yet"}
		}
		if len(c.Templates) > 0 {
			return &ConfigError{Field: "sandbox.templates", Msg: "are not supported with several Engines (sandbox.engines) yet"}
		}
	}
	for _, name := range c.TemplateNames()[1:] {
		field := "sandbox.templates." + name
		if name == DefaultTemplate {
			return &ConfigError{Field: field, Msg: "the default template is the top-level sandbox settings; change those (sandbox.docker.*)"}
		}
		if !templateName().MatchString(name) {
			return &ConfigError{Field: field, Msg: "a template name is 1-63 lower-case letters, digits, - and _, starting with a letter or digit"}
		}
		t := c.Templates[name]
		if t.CPUs < 0 {
			return &ConfigError{Field: field + ".cpus", Value: fmt.Sprint(t.CPUs), Msg: "must be >= 0"}
		}
		if t.PidsLimit < 0 {
			return &ConfigError{Field: field + ".pidsLimit", Value: fmt.Sprint(t.PidsLimit), Msg: "must be >= 0"}
		}
		d, _ := c.TemplateDocker(name)
		one := c
		one.Docker, one.Templates, one.Pool.Size = d, nil, t.Pool
		if err := one.Validate(); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) && strings.HasPrefix(ce.Field, "sandbox.docker.") {
				renamed := *ce
				renamed.Field = field + "." + strings.TrimPrefix(ce.Field, "sandbox.docker.")
				return &renamed
			}
			if errors.As(err, &ce) && ce.Field == "sandbox.pool.size" {
				renamed := *ce
				renamed.Field = field + ".pool"
				return &renamed
			}
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}
