package sandbox

// TestLabels gives the external tests of this package (package sandbox_test)
// the labels of a container of this run.
var TestLabels = testLabels
