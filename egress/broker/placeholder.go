package broker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// placeholderKeyFile holds the daemon's placeholder key (32 random bytes,
// 0600) next to its CA.
const placeholderKeyFile = "placeholder-key"

// PlaceholderPrefix starts every placeholder, so one is recognisable in a
// request, a log or a sandbox's env.
const PlaceholderPrefix = "SANDBOXCTL_PLACEHOLDER_"

// placeholders derives each secret's placeholder from the daemon's key: the
// same across restarts (a sandbox's env, and so its config hash, stays the
// same), different per daemon, and not guessable without the key.
type placeholders struct{ key []byte }

func loadOrCreatePlaceholderKey(dir string) (placeholders, error) {
	p := filepath.Join(dir, placeholderKeyFile)
	key, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return placeholders{}, fmt.Errorf("broker: placeholder key: %w", err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return placeholders{}, fmt.Errorf("broker: placeholder key: %w", err)
		}
		_, werr := f.Write(key)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return placeholders{}, fmt.Errorf("broker: placeholder key: %w", werr)
		}
		return placeholders{key: key}, nil
	}
	if err != nil {
		return placeholders{}, fmt.Errorf("broker: placeholder key: %w", err)
	}
	if len(key) != 32 {
		return placeholders{}, fmt.Errorf("broker: placeholder key %s: want 32 bytes, have %d", p, len(key))
	}
	return placeholders{key: key}, nil
}

// of is the placeholder of the secret name.
func (p placeholders) of(name string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("sandboxctl placeholder\x00" + name))
	return PlaceholderPrefix + name + "_" + hex.EncodeToString(m.Sum(nil)[:20])
}
