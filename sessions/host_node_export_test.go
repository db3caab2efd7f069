package sessions

// NodeRefusalForTest exposes nodeRefusal to the external tests.
var NodeRefusalForTest = nodeRefusal
