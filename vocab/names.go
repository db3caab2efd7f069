package vocab

// HostNames are the hosts' names, in order (enums of schemas, metric labels).
func HostNames() []string { return names(hosts) }

// SecurityNames are the security modes' names, most restrictive first.
func SecurityNames() []string { return names(securityOrder) }

// AskNames are the ask modes' names, least asking first.
func AskNames() []string { return names(askOrder) }
