package supervisor

import (
	"runtime"
	"sync"
)

// ReservedThreads is how many OS threads the supervisor makes at its start
// and keeps idle for later (ReserveThreads). A sandbox's pids limit counts
// threads too: once its commands have taken every pid, the Go runtime of
// the supervisor can no longer make a thread for a blocking system call
// (a fork, a file read, /proc), and a refused thread is fatal to a Go
// program ("newosproc"), and so to the sandbox. With this many threads made
// up front while pids are free, the runtime takes idle ones instead of
// asking the kernel: about the number of system calls the supervisor can
// block in at once under load (TestFaultPidsLimitSupervisorSurvives drives
// two dozen concurrent calls at a full sandbox).
const ReservedThreads = 12

// ReserveThreads makes the Go runtime create at least n OS threads now and
// park them idle. It never ends a thread it made (only a goroutine that
// exits while locked to its thread ends it), so they stay for the life of
// the process. Each goroutine below locks itself to a thread and blocks,
// which forces the runtime to make another thread for the next; then all
// unlock and return, leaving their threads idle.
func ReserveThreads(n int) {
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		locked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}
