package guard

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// ErrElevatedNotAllowed is returned when elevated is requested but disabled
// or the requester is not in allowFrom.
var ErrElevatedNotAllowed = errors.New("elevated not allowed")

// Elevated is the `elevated` configuration block.
type Elevated struct {
	Enabled      bool
	AllowFrom    []string            // requester ids (agent ids, channels); "*" allows everyone; empty allows nobody
	DefaultLevel vocab.ElevatedLevel // level granted to an allowed request; empty means ask
}

// Check decides an elevated request from requester `from`. A request that
// does not ask for elevation gets vocab.ElevatedOff and no error.
func (e Elevated) Check(requested bool, from string) (vocab.ElevatedLevel, error) {
	if !requested {
		return vocab.ElevatedOff, nil
	}
	if !e.Enabled {
		return vocab.ElevatedOff, fmt.Errorf("elevated is disabled in the configuration: %w", ErrElevatedNotAllowed)
	}
	if !slices.Contains(e.AllowFrom, "*") && (from == "" || !slices.Contains(e.AllowFrom, from)) {
		return vocab.ElevatedOff, fmt.Errorf("requester %q is not in elevated.allowFrom: %w", from, ErrElevatedNotAllowed)
	}
	lvl := e.DefaultLevel
	if lvl == "" {
		lvl = vocab.ElevatedAsk
	}
	if _, err := vocab.ParseElevatedLevel(string(lvl)); err != nil {
		return vocab.ElevatedOff, fmt.Errorf("elevated.defaultLevel: %w", err)
	}
	if lvl == vocab.ElevatedOff {
		return vocab.ElevatedOff, fmt.Errorf("elevated.defaultLevel is off: %w", ErrElevatedNotAllowed)
	}
	return lvl, nil
}

// RequiresApproval is SPEC §5's formula.
func RequiresApproval(ask vocab.Ask, sec vocab.Security, analysisOK, allowlisted bool) bool {
	return ask == vocab.AskAlways || (ask == vocab.AskOnMiss && sec == vocab.SecurityAllowlist && (!analysisOK || !allowlisted))
}
