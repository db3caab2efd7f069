package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sandboxctl/sandboxctl/api"
)

// Pin is the agent a TCP client is held to by its agent token: its exec and
// process calls act as that agent (whatever agentId they send), and the
// event stream and the approvals list show it only that agent's items.
type Pin struct {
	AgentID string
}

type pinKey struct{}

// PinFrom returns the pin of a request made with an agent token.
func PinFrom(ctx context.Context) (Pin, bool) {
	p, ok := ctx.Value(pinKey{}).(Pin)
	return p, ok
}

// AgentTokensFileName is the agent-token file in the state directory.
const AgentTokensFileName = "agent-tokens.json"

// LoadAgentTokens reads a JSON object {"<agentId>": "<token>", ...} (mode
// 0600, like every token file) and returns token → agent. A missing file is
// no agent tokens. Every token must be at least 16 characters and unique.
func LoadAgentTokens(path string) (map[string]string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: agent tokens: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("daemon: agent token file %s is readable by others (mode %04o); run chmod 600 on it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("daemon: agent tokens: %w", err)
	}
	var byAgent map[string]string
	if err := json.Unmarshal(data, &byAgent); err != nil {
		return nil, fmt.Errorf("daemon: agent token file %s: want a JSON object {\"agentId\": \"token\"}: %w", path, err)
	}
	out := make(map[string]string, len(byAgent))
	agents := make([]string, 0, len(byAgent))
	for a := range byAgent {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, agent := range agents {
		tok := strings.TrimSpace(byAgent[agent])
		switch {
		case strings.TrimSpace(agent) == "":
			return nil, fmt.Errorf("daemon: agent token file %s: an empty agent id", path)
		case len(tok) < minTokenLen:
			return nil, fmt.Errorf("daemon: agent token file %s: the token of %q is shorter than %d characters", path, agent, minTokenLen)
		case out[tok] != "":
			return nil, fmt.Errorf("daemon: agent token file %s: %q and %q share a token", path, out[tok], agent)
		}
		out[tok] = agent
	}
	return out, nil
}

// agentTokens matches bearer tokens to agents in constant time per token.
type agentTokens []struct {
	sum   [32]byte
	agent string
}

func newAgentTokens(byToken map[string]string) agentTokens {
	var out agentTokens
	for tok, agent := range byToken {
		out = append(out, struct {
			sum   [32]byte
			agent string
		}{sha256.Sum256([]byte(tok)), agent})
	}
	return out
}

// match returns the agent of token; every entry is compared, so the time
// does not tell which one matched.
func (a agentTokens) match(token string) (string, bool) {
	got := sha256.Sum256([]byte(token))
	agent, ok := "", false
	for _, e := range a {
		if subtle.ConstantTimeCompare(got[:], e.sum[:]) == 1 {
			agent, ok = e.agent, true
		}
	}
	return agent, ok
}

// visibleTo reports whether an event belongs to the pinned agent.
func visibleTo(p Pin, ev api.Event) bool { return ev.AgentID == p.AgentID }
