package nodeexec

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
)

// ErrIdentityTaken classifies a node refused because the id or name it
// claims belongs to another node's credential.
var ErrIdentityTaken = errors.New("node identity taken")

// Refusal is a node refused at its hello for the identity it claims.
type Refusal struct {
	NodeID, Name, Remote string
	Err                  error // wraps ErrIdentityTaken
}

// enrolment binds a node's id and name to its credential (Hello.Key): the
// gateway's trust on first use. Ids and names are one namespace: no node
// may claim as its id or name what is another node's id or name.
type enrolment struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	KeySHA256  string    `json:"keySha256"`
	EnrolledAt time.Time `json:"enrolledAt"`
}

// enrolments are the bindings the Registry knows, kept in
// RegistryOptions.IdentityFile when set. Guarded by Registry.mu.
type enrolments struct {
	path string
	list []enrolment
}

func loadEnrolments(path string) (*enrolments, error) {
	e := &enrolments{path: path}
	if path == "" {
		return e, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nodeexec: node identities: %w", err)
	}
	if err := json.Unmarshal(data, &e.list); err != nil {
		return nil, fmt.Errorf("nodeexec: node identities %s: %w", path, err)
	}
	return e, nil
}

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// admit checks h against the bindings and, when it is admitted, binds (or
// re-binds a renamed node's) id and name to its credential, persisted
// before the node gets its link. A refusal wraps ErrIdentityTaken.
func (e *enrolments) admit(h Hello, now time.Time) error {
	hash := keyHash(h.Key)
	own := -1
	for i, b := range e.list {
		if b.ID == h.NodeID {
			own = i
			continue
		}
		for _, claim := range []string{h.NodeID, h.Name} {
			if claim == b.ID || claim == b.Name {
				return fmt.Errorf("%w: %q is the id or name of node %s (%s), enrolled with another credential", ErrIdentityTaken, claim, b.Name, b.ID)
			}
		}
	}
	if own >= 0 {
		b := &e.list[own]
		if subtle.ConstantTimeCompare([]byte(b.KeySHA256), []byte(hash)) != 1 {
			return fmt.Errorf("%w: node id %q is enrolled with another credential", ErrIdentityTaken, h.NodeID)
		}
		if b.Name == h.Name {
			return nil
		}
		b.Name = h.Name // the same node, renamed: the new name was free
		return e.save()
	}
	e.list = append(e.list, enrolment{ID: h.NodeID, Name: h.Name, KeySHA256: hash, EnrolledAt: now})
	return e.save()
}

func (e *enrolments) save() error {
	if e.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(e.list, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(e.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("nodeexec: save node identities: %w", err)
	}
	return nil
}
