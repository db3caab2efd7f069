package e2b

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
)

// record is one E2B sandbox: a sandboxctl scope (the API key's agent, the
// sandbox id as the session key) and what the control API keeps about it.
type record struct {
	ID        string            `json:"id"`
	AgentID   string            `json:"agentId"`
	Template  string            `json:"template"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Envs      map[string]string `json:"envs,omitempty"`
	StartedAt time.Time         `json:"startedAt"`
	EndAt     time.Time         `json:"endAt"`
	// EnvdToken is the sandbox's own access token for the envd API.
	EnvdToken string `json:"envdToken"`
	// Paused is set between pause and connect; a paused sandbox does not
	// time out.
	Paused bool `json:"paused,omitempty"`
}

// registry holds the E2B sandboxes, persisted in one file of the state
// directory so that a restarted daemon knows them (and their processes,
// which are sessions, survive it).
type registry struct {
	path string
	mu   sync.Mutex
	recs map[string]*record
	// procs remembers how each process was started (cmd, args, tag) by
	// sandbox id and pid; after a restart a process is found by its pid
	// among the sessions, without its original config.
	procs map[string]map[uint32]procRecord
}

type procRecord struct {
	SessionID string
	Config    processConfig
	Tag       *string
	PTY       bool
}

func openRegistry(path string) (*registry, error) {
	r := &registry{path: path, recs: map[string]*record{}, procs: map[string]map[uint32]procRecord{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("e2b: %w", err)
	}
	var list []*record
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("e2b: %s: %w", path, err)
	}
	for _, rec := range list {
		r.recs[rec.ID] = rec
	}
	return r, nil
}

// saveLocked writes the registry; r.mu is held.
func (r *registry) saveLocked() error {
	list := make([]*record, 0, len(r.recs))
	for _, rec := range r.recs {
		list = append(list, rec)
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(r.path, data, 0o600); err != nil {
		return fmt.Errorf("e2b: save sandboxes: %w", err)
	}
	return nil
}

func (r *registry) add(rec *record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs[rec.ID] = rec
	return r.saveLocked()
}

func (r *registry) remove(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recs, id)
	delete(r.procs, id)
	return r.saveLocked()
}

// get returns a copy of agent's sandbox id; false when there is none (or it
// is another agent's: a key never learns that another key's sandbox
// exists).
func (r *registry) get(agentID, id string) (record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	if !ok || rec.AgentID != agentID {
		return record{}, false
	}
	return *rec, true
}

// byToken returns sandbox id when token is its envd access token.
func (r *registry) byToken(id, token string) (record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	if !ok || subtle.ConstantTimeCompare([]byte(rec.EnvdToken), []byte(token)) != 1 {
		return record{}, false
	}
	return *rec, true
}

func (r *registry) list(agentID string) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, rec := range r.recs {
		if rec.AgentID == agentID {
			out = append(out, *rec)
		}
	}
	return out
}

func (r *registry) setEnd(agentID, id string, end time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	if !ok || rec.AgentID != agentID {
		return false
	}
	rec.EndAt = end
	_ = r.saveLocked()
	return true
}

func (r *registry) setPaused(id string, paused bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	if !ok {
		return fmt.Errorf("e2b: sandbox %s is gone", id)
	}
	rec.Paused = paused
	return r.saveLocked()
}

// expired returns the sandboxes whose end is before now.
func (r *registry) expired(now time.Time) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, rec := range r.recs {
		if !rec.Paused && !rec.EndAt.After(now) {
			out = append(out, *rec)
		}
	}
	return out
}

func (r *registry) addProc(id string, pid uint32, p procRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[id] == nil {
		r.procs[id] = map[uint32]procRecord{}
	}
	r.procs[id][pid] = p
}

func (r *registry) proc(id string, pid uint32) (procRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[id][pid]
	return p, ok
}

// newID returns n random bytes in hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (r *registry) exists(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.recs[id]
	return ok
}

// running reports whether sandbox id exists and is not paused.
func (r *registry) running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	return ok && !rec.Paused
}
