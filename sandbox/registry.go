package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
)

// registry keeps last-used times of sandboxes in the state directory
// (sandboxes.json). The Engine's container list is the source of truth for
// which sandboxes exist; this file only says when each was last used. Writes
// are debounced so a busy sandbox does not fsync on every command.
type registry struct {
	path string
	now  func() time.Time

	mu        sync.Mutex
	loaded    bool
	entries   map[string]registryEntry
	dirty     bool
	lastWrite time.Time
}

type registryEntry struct {
	ScopeKey     string `json:"scopeKey"`
	LastUsedAtMs int64  `json:"lastUsedAtMs"`
}

const registryWriteEvery = 5 * time.Second

func newRegistry(path string, now func() time.Time) *registry {
	return &registry{path: path, now: now, entries: map[string]registryEntry{}}
}

func (r *registry) loadLocked() {
	if r.loaded {
		return
	}
	r.loaded = true
	data, err := os.ReadFile(r.path)
	if err != nil {
		return
	}
	var on map[string]registryEntry
	if json.Unmarshal(data, &on) == nil {
		for k, v := range on {
			if cur, ok := r.entries[k]; !ok || v.LastUsedAtMs > cur.LastUsedAtMs {
				r.entries[k] = v
			}
		}
	}
}

func (r *registry) lastUsed(name string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	e, ok := r.entries[name]
	if !ok || e.LastUsedAtMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(e.LastUsedAtMs)
}

func (r *registry) touch(name, scopeKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	r.entries[name] = registryEntry{ScopeKey: scopeKey, LastUsedAtMs: r.now().UnixMilli()}
	r.dirty = true
	if r.now().Sub(r.lastWrite) >= registryWriteEvery {
		r.writeLocked()
	}
}

func (r *registry) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	delete(r.entries, name)
	r.dirty = true
	r.writeLocked()
}

func (r *registry) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirty {
		r.writeLocked()
	}
}

// writeLocked writes the file atomically (temp + rename). Errors are not
// fatal: last-used times only steer pruning and the recreate rule.
func (r *registry) writeLocked() {
	r.lastWrite = r.now()
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return
	}
	data, err := json.MarshalIndent(r.entries, "", "  ")
	if err != nil {
		return
	}
	if atomicfile.Write(r.path, data, 0o600) != nil {
		return
	}
	r.dirty = false
}
