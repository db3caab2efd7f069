// Package eventjournal keeps the daemon's events in a bounded journal on
// disk, numbered by a cursor, so that a client reconnecting with the last
// cursor it saw gets everything it missed, or is told that it fell off the
// end. Two segment files under the state directory hold the events: when
// the current one is full it replaces the old one, so the disk use is at
// most twice the segment size; the events held are also kept in memory
// (the same bound), which is where readers read them.
package eventjournal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sandboxctl/sandboxctl/api"
)

// File names of the two segments inside the journal's directory.
const (
	CurrentName = "events.ndjson"
	OldName     = "events.old.ndjson"
)

// DefaultSegmentBytes is the size of a segment unless Open is told another.
const DefaultSegmentBytes = 1 << 20

// Journal is safe for concurrent use.
type Journal struct {
	dir      string
	segBytes int64

	mu      sync.Mutex
	f       *os.File // the current segment, appended to
	size    int64    // bytes in the current segment
	old     []api.Event
	cur     []api.Event
	next    int64         // the cursor of the next event (cursors start at 1)
	changed chan struct{} // closed on the next append
	closed  bool
}

// Open opens (creating when missing, mode 0700) the journal in dir with
// segments of segBytes (DefaultSegmentBytes when <= 0) and loads the
// events it holds; a line that does not parse (a write cut by a crash) is
// skipped. Cursors go on from the last one held.
func Open(dir string, segBytes int64) (*Journal, error) {
	if segBytes <= 0 {
		segBytes = DefaultSegmentBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("event journal: %w", err)
	}
	j := &Journal{dir: dir, segBytes: segBytes, next: 1, changed: make(chan struct{})}
	var err error
	if j.old, _, err = load(filepath.Join(dir, OldName)); err != nil {
		return nil, err
	}
	if j.cur, j.size, err = load(filepath.Join(dir, CurrentName)); err != nil {
		return nil, err
	}
	for _, seg := range [][]api.Event{j.old, j.cur} {
		if n := len(seg); n > 0 && seg[n-1].Cursor >= j.next {
			j.next = seg[n-1].Cursor + 1
		}
	}
	if j.f, err = os.OpenFile(filepath.Join(dir, CurrentName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("event journal: %w", err)
	}
	// Drop a cut last line, so the next event starts a line of its own.
	if err := j.f.Truncate(j.size); err != nil {
		_ = j.f.Close()
		return nil, fmt.Errorf("event journal: %w", err)
	}
	return j, nil
}

// load reads a segment: its events in order and the size of its complete
// lines (a last line without its newline was cut by a crash).
func load(path string) ([]api.Event, int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("event journal: %w", err)
	}
	var evs []api.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), len(data)+1)
	for sc.Scan() {
		var ev api.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Cursor <= 0 {
			continue
		}
		if n := len(evs); n > 0 && ev.Cursor <= evs[n-1].Cursor {
			continue
		}
		evs = append(evs, ev)
	}
	return evs, int64(bytes.LastIndexByte(data, '\n') + 1), nil
}

// Append gives ev the next cursor, writes it and returns it. The event is
// kept (and readers are woken) even when the write fails; the error says
// it will not survive a restart.
func (j *Journal) Append(ev api.Event) (api.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ev.Cursor = j.next
	j.next++
	line, err := json.Marshal(ev)
	if err != nil {
		return ev, fmt.Errorf("event journal: encode: %w", err)
	}
	line = append(line, '\n')
	var werr error
	if j.size > 0 && j.size+int64(len(line)) > j.segBytes {
		werr = j.rotateLocked()
	}
	j.cur = append(j.cur, ev)
	if j.f != nil && !j.closed {
		n, err := j.f.Write(line)
		j.size += int64(n)
		if err != nil && werr == nil {
			werr = fmt.Errorf("event journal: write: %w", err)
		}
	}
	close(j.changed)
	j.changed = make(chan struct{})
	return ev, werr
}

// rotateLocked makes the current segment the old one (dropping the old
// one's events) and starts an empty current segment.
func (j *Journal) rotateLocked() error {
	j.old, j.cur, j.size = j.cur, nil, 0
	if j.closed {
		return nil
	}
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	if err := os.Rename(filepath.Join(j.dir, CurrentName), filepath.Join(j.dir, OldName)); err != nil {
		return fmt.Errorf("event journal: rotate: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(j.dir, CurrentName), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("event journal: rotate: %w", err)
	}
	j.f = f
	return nil
}

// Gap describes events after a reader's cursor that the journal no longer
// holds.
type Gap struct {
	// Since is the reader's cursor; Oldest the oldest cursor held.
	Since, Oldest int64
	// Missed counts the events dropped to keep the journal bounded.
	Missed int64
	// Reset is true when the cursor is after the newest event: the journal
	// was removed and started again, so everything held is new to the
	// reader and how much it missed is unknown.
	Reset bool
}

// Read returns up to max events with a cursor after since, oldest first;
// the cursor of the newest event (0 when none was ever written); a Gap when
// events after since are no longer held; and a channel closed on the next
// append.
func (j *Journal) Read(since int64, max int) (evs []api.Event, last int64, gap *Gap, changed <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	last = j.next - 1
	changed = j.changed
	oldest := last + 1
	switch {
	case len(j.old) > 0:
		oldest = j.old[0].Cursor
	case len(j.cur) > 0:
		oldest = j.cur[0].Cursor
	}
	switch {
	case since > last:
		gap = &Gap{Since: since, Oldest: oldest, Reset: true}
		since = 0
	case since+1 < oldest:
		gap = &Gap{Since: since, Oldest: oldest, Missed: oldest - since - 1}
	}
	for _, seg := range [][]api.Event{j.old, j.cur} {
		for _, ev := range seg {
			if len(evs) >= max {
				return evs, last, gap, changed
			}
			if ev.Cursor > since {
				evs = append(evs, ev)
			}
		}
	}
	return evs, last, gap, changed
}

// Close closes the current segment; later appends are kept in memory only.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
