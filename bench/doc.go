// Package bench holds the performance benchmarks of sandboxctl that need a
// real Docker Engine, each printing its figures beside their baselines
// measured in the same run. BenchmarkSupervisor covers the sandbox
// supervisor on one container:
//
//	go test -run '^$' -bench Supervisor -benchtime 1x ./bench/
//
// BenchmarkCLIProcess (no Docker) measures the sandboxctl process's own
// share of `sandboxctl exec -- true` against a stand-in daemon that answers
// at once, beside a Go program that only exits:
//
//	go test -run '^$' -bench CLIProcess -benchtime 1x ./bench/
//
// BenchmarkRuntimes puts runc and gVisor (runsc) side by side: the first
// command of a new agent from the warm pool and cold, beside `docker run`,
// warm exec, throughput, resume after an idle pause and idle memory:
//
//	go test -run '^$' -bench Runtimes -benchtime 1x ./bench/
//
// The density program (bench/density) measures how costs grow with 50, 100
// and 200 sandboxes; bench/soak drives a daemon under injected faults.
package bench
