package toolapi

// The closed vocabularies of the tools' inputs, defined once: the tools
// validate against them, the MCP server advertises them as enums and the
// metrics use them as the only label values.
var (
	// Hosts are the values of ExecParams.Host.
	Hosts = []string{"sandbox", "gateway", "node"}
	// SecurityLevels are the values of ExecParams.Security, from the most
	// to the least restrictive.
	SecurityLevels = []string{"deny", "allowlist", "full"}
	// AskLevels are the values of ExecParams.Ask, from never to always.
	AskLevels = []string{"off", "on-miss", "always"}
	// ProcessActions are the values of ProcessParams.Action.
	ProcessActions = []string{"list", "poll", "log", "write", "send-keys", "paste", "submit", "kill", "clear", "remove", "resize"}
)
