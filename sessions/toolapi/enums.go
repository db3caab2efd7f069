package toolapi

// ProcessActions are the values of ProcessParams.Action, defined once: the
// process tool validates against them, the MCP server advertises them as an
// enum and the metrics use them as the only label values.
var ProcessActions = []string{"list", "poll", "log", "write", "send-keys", "paste", "submit", "kill", "clear", "remove", "resize"}
