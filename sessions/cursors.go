package sessions

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// cursorStore keeps, per session of a host whose sessions outlive the
// daemon (HostCaps.Recover), how much of its output polls have delivered: a
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

// retain drops the cursors of sessions not in keep, except those whose
// key starts with one of prefixes.
func (c *cursorStore) retain(keep map[string]bool, prefixes []string) error {
	if c.path == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for id := range c.m {
		if !keep[id] && !hasAnyPrefix(id, prefixes) {
			delete(c.m, id)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.writeLocked()
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
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

// cursorKey is the key of a session's cursor: its id, prefixed with its
// host for a host whose sessions come back late (HostCaps.Later): Recover
// cannot know yet which of those still exist, and keeps their cursors.
func (m *Manager) cursorKey(host vocab.Host, id string) string {
	if m.capsOf(host).late() {
		return string(host) + "/" + id
	}
	return id
}

// pendingOnRecover is the text a recovered session's next poll shows: the
// kept output after the position polls had delivered before the restart,
// and missed, how many bytes between that position and the kept output the
// host no longer had (the poll notes them as dropped).
func (m *Manager) pendingOnRecover(host vocab.Host, rs RecoveredSession) (text string, missed int64) {
	pos, known := m.cursors.get(m.cursorKey(host, rs.ID))
	if rs.ID == "" {
		known = false
	}
	if known {
		missed = max(rs.Covered-int64(len(rs.Output))-pos, 0)
	}
	dec := output.NewDecoder(rs.PTY)
	text, _ = dec.Feed(undelivered(rs.Output, rs.Covered, pos, known))
	return text + dec.Flush(), missed
}

// retainCursors forgets the cursors of sessions that no longer exist (but
// those of late hosts, see cursorKey).
func (m *Manager) retainCursors() {
	m.mu.Lock()
	keep := make(map[string]bool, len(m.sessions))
	for id, s := range m.sessions {
		keep[m.cursorKey(s.host, id)] = true
	}
	m.mu.Unlock()
	var late []string
	for name, h := range m.hosts {
		if h.Caps().late() {
			late = append(late, string(name)+"/")
		}
	}
	if err := m.cursors.retain(keep, late); err != nil {
		m.logf("sessions: %v", err)
	}
}
