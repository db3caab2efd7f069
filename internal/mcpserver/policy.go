package mcpserver

import (
	"slices"

	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Policy is what the configuration lets a caller choose in exec. A pinned
// server advertises only those choices, so a model is not offered fields
// that can only be refused; an unpinned one (an operator's) and a zero
// Policy advertise every field. Hidden fields are still accepted: the
// manager decides, with the same answer as over HTTP.
type Policy struct {
	Host              vocab.Host // the configured exec host; "" = unknown, advertise all
	ElevatedEnabled   bool
	ElevatedAllowFrom []string // agent ids, or "*"
}

// PolicyOf reads a Policy from a configuration.
func PolicyOf(cfg config.File) Policy {
	return Policy{Host: cfg.Exec.Host, ElevatedEnabled: cfg.Elevated.Enabled, ElevatedAllowFrom: cfg.Elevated.AllowFrom}
}

// execChoices are the exec fields and host values a pinned caller may use.
type execChoices struct {
	hosts    []string // the host enum
	elevated bool     // advertise elevated
	node     bool     // advertise node
}

// choicesFor says what id may choose; every field when unpinned or the
// policy is unknown.
func (p Policy) choicesFor(id Identity) execChoices {
	if !id.pinned() || p.Host == "" {
		return execChoices{hosts: vocab.HostNames(), elevated: true, node: true}
	}
	elevated := p.ElevatedEnabled && (slices.Contains(p.ElevatedAllowFrom, id.AgentID) || slices.Contains(p.ElevatedAllowFrom, "*"))
	hosts := []string{string(p.Host)}
	if elevated && p.Host != vocab.HostGateway {
		hosts = append(hosts, string(vocab.HostGateway)) // elevated runs use the gateway
	}
	return execChoices{hosts: hosts, elevated: elevated, node: p.Host == vocab.HostNode}
}
