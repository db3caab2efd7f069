package cli

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/envknob"
)

// Identity is what a daemon serves: its configuration file (absolute; ""
// for the built-in defaults), the Engine it talks to, and a hash of both
// the file's content and the Engine. The CLI sends its own with every
// request; a daemon with another answers 409 instead of silently running
// the command under another configuration.
func (c *CLI) Identity() (api.Identity, error) {
	id := api.Identity{Engine: envknob.DockerHost.Get(c.Getenv)}
	l, err := c.readOnce()
	if err != nil {
		return id, err
	}
	h := sha256.New()
	if l.path != "" {
		id.ConfigFile = l.path
		h.Write([]byte("file\x00"))
		h.Write(l.data)
	} else {
		h.Write([]byte("defaults\x00"))
	}
	h.Write([]byte("\x00engine\x00" + id.Engine))
	id.ConfigHash = hex.EncodeToString(h.Sum(nil))[:16]
	return id, nil
}

// ConfigContent is the configuration file as this invocation read it
// (nil: the built-in defaults), what a daemon records for the commands
// that follow it (apiclient.DaemonConfig).
func (c *CLI) ConfigContent() ([]byte, error) {
	if _, err := c.LoadConfig(); err != nil {
		return nil, err
	}
	return c.loaded.data, nil
}
