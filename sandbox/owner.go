package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// ErrOwnerMismatch marks a session kept by a supervisor whose recorded
// owner differs from the owner of its sandbox: it is not adopted.
var ErrOwnerMismatch = errors.New("session owner does not match its sandbox")

// sessionOwner returns the agent and session key a session found in a
// sandbox belongs to. Ownership comes from what the daemon wrote when it
// created the container (its labels), never from the session's metadata
// alone, which a process of the sandbox may have had a hand in:
//   - an agent's sandbox ("agent:<id>") owns its sessions for that agent;
//     the session key within the agent comes from the metadata;
//   - a session's sandbox ("session:<key>") owns them for its creator's
//     agent and key;
//   - the shared sandbox serves every agent, so only the metadata can say
//     which (every agent there shares one boundary anyway, SECURITY.md).
//
// Metadata that names another agent (or key) than the labels is refused
// with ErrOwnerMismatch; metadata that names no agent (a command not
// started by the daemon's sandbox host) claims nothing and is the
// sandbox's.
func sessionOwner(labels, meta map[string]string) (agentID, sessionKey string, err error) {
	scope := labels[LabelScopeKey]
	metaAgent, claimed := meta["agentId"]
	metaKey, keyClaimed := meta["sessionKey"]
	switch {
	case scope == "shared":
		return metaAgent, metaKey, nil
	case strings.HasPrefix(scope, "agent:"):
		agentID, sessionKey = labels[LabelAgentID], metaKey
	case strings.HasPrefix(scope, "session:"):
		agentID, sessionKey = labels[LabelAgentID], labels[LabelSessionKey]
		if keyClaimed && metaKey != sessionKey {
			return "", "", fmt.Errorf("%w: it names session key %q, the sandbox is %s's", ErrOwnerMismatch, metaKey, scope)
		}
	default:
		return "", "", fmt.Errorf("%w: the sandbox has no scope label", ErrOwnerMismatch)
	}
	if claimed && metaAgent != agentID {
		return "", "", fmt.Errorf("%w: it names agent %q, the sandbox belongs to agent %q", ErrOwnerMismatch, metaAgent, agentID)
	}
	return agentID, sessionKey, nil
}
