package eventjournal

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
)

// SpoolName is the directory, inside the journal's, where processes other
// than the daemon leave events for it (Spool): the journal has one writer,
// the daemon, which takes them in with Drain when it starts and while it
// runs.
const SpoolName = "spool"

// spoolSuffix ends a complete spooled event's file name; atomicfile writes
// under another name first, so a reader never sees half of one.
const spoolSuffix = ".json"

// Spool leaves ev in the spool of the journal in dir (creating it, mode
// 0700), for the daemon to journal: ev keeps its Time (set to now when
// zero); its cursor is given when it is drained. Files are named by time,
// so Drain takes them in the order they were spooled.
func Spool(dir string, ev api.Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Cursor = 0
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("event spool: encode: %w", err)
	}
	spool := filepath.Join(dir, SpoolName)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return fmt.Errorf("event spool: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("%020d-%s%s", ev.Time.UnixNano(), hex.EncodeToString(rnd[:]), spoolSuffix)
	if err := atomicfile.Write(filepath.Join(spool, name), data, 0o600); err != nil {
		return fmt.Errorf("event spool: %w", err)
	}
	return nil
}

// Spooled is an event taken from the spool, with the uid of the file's
// owner (who spooled it).
type Spooled struct {
	Event api.Event
	UID   int
}

// Drain hands the events spooled in the journal in dir to publish, oldest
// first, removing each after publish returned; a file that does not parse
// is removed too (and counted in the error). A crash between publish and
// the removal journals that event again at the next drain: an event is
// never lost, at worst repeated.
func Drain(dir string, publish func(Spooled)) (int, error) {
	spool := filepath.Join(dir, SpoolName)
	ents, err := os.ReadDir(spool)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("event spool: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasSuffix(n, spoolSuffix) && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var bad []string
	n := 0
	for _, name := range names {
		p := filepath.Join(spool, name)
		data, err := os.ReadFile(p)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		var s Spooled
		if err := json.Unmarshal(data, &s.Event); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			_ = os.Remove(p)
			continue
		}
		s.UID = -1
		if fi, err := os.Lstat(p); err == nil {
			s.UID = fileUID(fi)
		}
		s.Event.Cursor = 0
		publish(s)
		if err := os.Remove(p); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
		}
		n++
	}
	if len(bad) > 0 {
		return n, fmt.Errorf("event spool %s: %s", spool, strings.Join(bad, "; "))
	}
	return n, nil
}

func fileUID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
