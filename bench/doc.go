// Package bench holds the performance benchmarks of sandboxctl that need a
// real Docker Engine. BenchmarkSupervisor prints every figure of the
// sandbox supervisor beside its baseline, measured in the same run on the
// same container:
//
//	go test -run '^$' -bench Supervisor -benchtime 1x ./bench/
package bench
