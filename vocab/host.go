package vocab

// Host is where a command runs.
type Host string

// Hosts.
const (
	HostSandbox Host = "sandbox" // the agent's hardened container
	HostGateway Host = "gateway" // the daemon's own machine
	HostNode    Host = "node"    // a remote node
)

var hosts = []Host{HostSandbox, HostGateway, HostNode}

// ParseHost parses a host name (exact, case-sensitive).
func ParseHost(s string) (Host, error) {
	for _, h := range hosts {
		if string(h) == s {
			return h, nil
		}
	}
	return "", &ModeError{Kind: "host", Value: s, Valid: names(hosts)}
}

func names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
