package guard

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// ErrEnvBlocked is wrapped by the default EnvCheck when an env/sudo wrapper
// assigns a variable that hooks loaders, interpreters or tools.
var ErrEnvBlocked = errors.New("environment variable blocked")

// blockedEnv is checked after envguard's gateway rules, which own the list
// of variables that load code or run commands (and PATH): these are the
// shell's own lookup hooks that matter for how a command line is read. It
// only guards assignments made inside the command line (`env K=V cmd`,
// `sudo K=V cmd`); the request env is envguard's business. Keys are compared
// upper-cased.
var blockedEnv = map[string]bool{"CDPATH": true, "GLOBIGNORE": true}

// defaultEnvCheck applies envguard's gateway rules (the authoritative
// policy: PATH, blocked-everywhere and override-only keys, any case), then
// this package's list of shell and loader hooks on top.
func defaultEnvCheck(assign map[string]string) error {
	if err := envguard.CheckRequest(vocab.HostGateway, assign); err != nil {
		return fmt.Errorf("%w: %w", ErrEnvBlocked, err)
	}
	keys := make([]string, 0, len(assign))
	for k := range assign {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !validEnvName.MatchString(k) {
			return fmt.Errorf("%q is not a valid variable name: %w", k, ErrEnvBlocked)
		}
		if blockedEnv[strings.ToUpper(k)] {
			return fmt.Errorf("%s is a blocked variable: %w", k, ErrEnvBlocked)
		}
	}
	return nil
}
