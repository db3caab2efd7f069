package nodeexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandboxctl/sandboxctl/hostexec"
)

// runLedger records, under the node's state directory, the run tag of every
// command the agent started and has not yet seen end (one empty file per
// tag in StateDir/runs). An agent that dies leaves its entries behind; the
// next agent on the state directory ends every process still carrying one
// of those tags before it connects, so nothing the dead agent started keeps
// running untracked. (The gateway fails those runs: the node comes back
// without them, or not within the link grace.)
type runLedger struct {
	dir  string
	lock *os.File // agent.lock, held for the agent's life
}

func openRunLedger(stateDir string) (*runLedger, error) {
	dir := filepath.Join(stateDir, "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nodeexec: run ledger: %w", err)
	}
	// One agent per state directory: a second one must neither sweep the
	// first one's live runs nor answer for them. The lock is held until
	// this process exits (the descriptor is close-on-exec).
	lock, err := os.OpenFile(filepath.Join(stateDir, "agent.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("nodeexec: another node agent runs on the state directory %s (it holds agent.lock)", stateDir)
		}
		return nil, fmt.Errorf("nodeexec: lock %s: %w", lock.Name(), err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nodeexec: run ledger: %w", err)
	}
	return &runLedger{dir: dir, lock: lock}, nil
}

// close releases the state directory for the next agent.
func (l *runLedger) close() { _ = l.lock.Close() }

// add records tag before its command starts.
func (l *runLedger) add(tag string) error {
	if err := os.WriteFile(filepath.Join(l.dir, tag), nil, 0o600); err != nil {
		return fmt.Errorf("nodeexec: run ledger: %w", err)
	}
	return nil
}

// done forgets tag once its command ended (and its tree was swept).
// A failed removal leaves a stale entry, which only costs the next agent a
// sweep that finds nothing.
func (l *runLedger) done(tag string) { _ = os.Remove(filepath.Join(l.dir, tag)) }

// sweep ends the processes of every recorded run (a previous agent's) and
// clears the ledger. It returns how many runs still had processes.
func (l *runLedger) sweep(logf func(string, ...any)) int {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		logf("nodeexec: run ledger: %v", err)
		return 0
	}
	runs := 0
	for _, e := range entries {
		tag := e.Name()
		n, err := hostexec.SweepTag(tag)
		if err != nil {
			logf("nodeexec: ending what run %s of a previous agent left: %v", tag, err)
			continue
		}
		if n > 0 {
			runs++
			logf("nodeexec: ended %d process(es) of run %s, started by a previous agent that died", n, tag)
		}
		l.done(tag)
	}
	return runs
}
