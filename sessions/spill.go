package sessions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxctl/sandboxctl/sessions/output"
)

// A finished session's output (the aggregated log and the unpolled tails)
// is spilled to a file of its own under Options.SpillDir and dropped from
// the heap, so the daemon's memory does not grow with the sessions it
// keeps for polling (issue 25 #13). Every reader brings it back for the
// time it holds s.mu (inflateLocked) and lets it go again.

// spilledOutput is the file's content.
type spilledOutput struct {
	Agg     output.LogState  `json:"agg"`
	PendOut output.TailState `json:"pendOut"`
	PendErr output.TailState `json:"pendErr"`
}

// spillLocked writes s's output to its spill file and drops the buffers.
// Without a spill directory, or when the write fails (logged), the output
// stays in memory.
func (m *Manager) spillLocked(s *session) {
	if m.spillDir == "" || s.spillPath != "" && s.agg == nil {
		return
	}
	path := filepath.Join(m.spillDir, s.id+".json")
	if err := writeSpill(path, s); err != nil {
		m.logf("sessions: %s: output stays in memory: %v", s.id, err)
		return
	}
	s.spillPath = path
	s.agg, s.pendOut, s.pendErr = nil, nil, nil
}

func writeSpill(path string, s *session) error {
	data, err := json.Marshal(spilledOutput{Agg: s.agg.State(), PendOut: s.pendOut.State(), PendErr: s.pendErr.State()})
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("spill output: %w", err)
	}
	return nil
}

// inflateLocked brings a spilled session's output back into s.agg,
// s.pendOut and s.pendErr; the returned func writes back what changed
// (polls drain the pending tails, a late reader appends) and drops them
// again. Call both under s.mu. A spill file that cannot be read is logged
// and its output counted as dropped, never made up.
func (m *Manager) inflateLocked(s *session) (release func()) {
	if s.agg != nil {
		return func() {}
	}
	var so spilledOutput
	data, err := os.ReadFile(s.spillPath)
	if err == nil {
		err = json.Unmarshal(data, &so)
	}
	if err != nil {
		m.logf("sessions: %s: spilled output lost: %v", s.id, err)
		so = spilledOutput{Agg: output.LogState{Tail: output.TailState{Max: m.lim.MaxOutputChars, Base: s.spillEnd}},
			PendOut: output.TailState{Max: m.lim.PendingMaxOutputChars}, PendErr: output.TailState{Max: m.lim.PendingMaxOutputChars}}
	}
	s.agg = output.LogFromState(so.Agg)
	s.pendOut = output.TailFromState(so.PendOut)
	s.pendErr = output.TailFromState(so.PendErr)
	before := outputMark(s)
	return func() {
		if outputMark(s) != before {
			if err := writeSpill(s.spillPath, s); err != nil {
				m.logf("sessions: %s: output stays in memory: %v", s.id, err)
				return
			}
		}
		s.spillEnd = s.agg.End()
		s.agg, s.pendOut, s.pendErr = nil, nil, nil
	}
}

// outputMark changes whenever a session's buffers do (a write, a drain).
func outputMark(s *session) [7]int64 {
	return [7]int64{s.agg.End(), s.agg.Dropped(), s.pendOut.Start(), s.pendOut.End(), s.pendOut.Dropped(), s.pendErr.End(), s.pendErr.Dropped()}
}

// removeSpill deletes a forgotten session's spill file.
func (m *Manager) removeSpill(s *session) {
	s.mu.Lock()
	path := s.spillPath
	s.mu.Unlock()
	if path == "" {
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.logf("sessions: %s: %v", s.id, err)
	}
}

// prepareSpillDir creates dir (0700) and removes what a previous daemon
// left in it: spilled output belongs to sessions of that process only.
func prepareSpillDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sessions: spill directory: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return fmt.Errorf("sessions: spill directory: %w", err)
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("sessions: spill directory: %w", err)
		}
	}
	return nil
}

// heldOutputBytes is the capacity of the output buffers the Manager holds
// in memory (spilled sessions hold none).
func (m *Manager) heldOutputBytes() int {
	m.mu.Lock()
	list := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		list = append(list, s)
	}
	m.mu.Unlock()
	n := 0
	for _, s := range list {
		s.mu.Lock()
		if s.agg != nil {
			n += s.agg.CapBytes() + s.pendOut.CapBytes() + s.pendErr.CapBytes()
		}
		s.mu.Unlock()
	}
	return n
}
