package sessions

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/sessions/output"
)

// cursorStore keeps, per session of a host whose sessions outlive the
// daemon (a Recoverer), how much of its output polls have delivered: a
// raw byte position in the session's output (both streams counted). A
// restarted daemon resumes the next poll there instead of repeating what
// the agent already saw. The file is small and written atomically on each
// poll that delivered something.
type cursorStore struct {
	path string

	mu sync.Mutex
	m  map[string]int64
}

// openCursors loads path ("" keeps no cursors). A missing or unreadable
// file starts empty: at worst, output is shown again.
func openCursors(path string) *cursorStore {
	c := &cursorStore{path: path, m: map[string]int64{}}
	if path == "" {
		return c
	}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &c.m)
	}
	return c
}

func (c *cursorStore) get(id string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pos, ok := c.m[id]
	return pos, ok
}

// set records that id's output was delivered up to pos.
func (c *cursorStore) set(id string, pos int64) error {
	if c.path == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[id] == pos {
		return nil
	}
	c.m[id] = pos
	return c.writeLocked()
}

// retain drops the cursors of sessions not in keep.
func (c *cursorStore) retain(keep map[string]bool) error {
	if c.path == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for id := range c.m {
		if !keep[id] {
			delete(c.m, id)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.writeLocked()
}

func (c *cursorStore) writeLocked() error {
	data, err := json.Marshal(c.m)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(c.path, data, 0o600); err != nil {
		return fmt.Errorf("poll cursors: %w", err)
	}
	return nil
}

// undelivered is the part of a recovered session's kept output that no
// poll delivered before the restart. covered is the raw byte count the
// kept output ends at; output holds its last len(output) bytes.
func undelivered(output []byte, covered, delivered int64, known bool) []byte {
	if !known {
		return output
	}
	skip := delivered - (covered - int64(len(output)))
	switch {
	case skip <= 0:
		return output
	case skip >= int64(len(output)):
		return nil
	}
	return output[skip:]
}

// pendingOnRecover is the text a recovered session's next poll shows: the
// kept output after the position polls had delivered before the restart.
func (m *Manager) pendingOnRecover(rs RecoveredSession) string {
	pos, known := m.cursors.get(rs.ID)
	if rs.ID == "" {
		known = false
	}
	dec := output.NewDecoder(rs.PTY)
	text, _ := dec.Feed(undelivered(rs.Output, rs.Covered, pos, known))
	return text + dec.Flush()
}

// retainCursors forgets the cursors of sessions that no longer exist.
func (m *Manager) retainCursors() {
	m.mu.Lock()
	keep := make(map[string]bool, len(m.sessions))
	for id := range m.sessions {
		keep[id] = true
	}
	m.mu.Unlock()
	if err := m.cursors.retain(keep); err != nil {
		m.logf("sessions: %v", err)
	}
}
