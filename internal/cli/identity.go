package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// Identity is what a daemon serves: its configuration file (absolute; ""
// for the built-in defaults), the Engine it talks to, and a hash of both
// the file's content and the Engine. The CLI sends its own with every
// request; a daemon with another answers 409 instead of silently running
// the command under another configuration.
func (c *CLI) Identity() (apiclient.Identity, error) {
	id := apiclient.Identity{Engine: envknob.DockerHost.Get(c.Getenv)}
	h := sha256.New()
	if c.ConfigPath != "" {
		p, err := config.ExpandHome(c.ConfigPath)
		if err != nil {
			return id, err
		}
		if id.ConfigFile, err = filepath.Abs(p); err != nil {
			return id, fmt.Errorf("config path: %w", err)
		}
		data, err := os.ReadFile(id.ConfigFile)
		if err != nil {
			return id, fmt.Errorf("config: %w", err)
		}
		h.Write([]byte("file\x00"))
		h.Write(data)
	} else {
		h.Write([]byte("defaults\x00"))
	}
	h.Write([]byte("\x00engine\x00" + id.Engine))
	id.ConfigHash = hex.EncodeToString(h.Sum(nil))[:16]
	return id, nil
}
