package vocab

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownMode is returned (wrapped in a *ModeError) for a security, ask,
// askFallback, elevated-level or decision value that is not one of the
// documented names.
var ErrUnknownMode = errors.New("unknown mode")

// ModeError names the setting, the bad value and the valid values.
type ModeError struct {
	Kind  string   // "security", "ask", "askFallback", "elevated level", "host", "decision", ...
	Value string   // what was given
	Valid []string // what would have been accepted
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("unknown %s %q (valid: %s)", e.Kind, e.Value, strings.Join(e.Valid, ", "))
}

// Unwrap makes errors.Is(err, ErrUnknownMode) true.
func (e *ModeError) Unwrap() error { return ErrUnknownMode }

// Security is the security mode of a host: what may run at all.
type Security string

// Security modes, from most to least restrictive.
const (
	SecurityDeny      Security = "deny"      // refuse everything
	SecurityAllowlist Security = "allowlist" // run only allowlisted, safe-bin or approved commands
	SecurityFull      Security = "full"      // run everything
)

var securityOrder = []Security{SecurityDeny, SecurityAllowlist, SecurityFull}

// ParseSecurity parses a security mode name (exact, case-sensitive).
func ParseSecurity(s string) (Security, error) {
	for _, m := range securityOrder {
		if string(m) == s {
			return m, nil
		}
	}
	return "", &ModeError{Kind: "security", Value: s, Valid: names(securityOrder)}
}

func (s Security) rank() int { return slices.Index(securityOrder, s) }

// Valid reports whether s is one of the three security modes.
func (s Security) Valid() bool { return s.rank() >= 0 }

// MinSecurity returns the more restrictive of a and b. An invalid value counts
// as deny (fail closed).
func MinSecurity(a, b Security) Security {
	ra, rb := a.rank(), b.rank()
	if ra < 0 || rb < 0 {
		return SecurityDeny
	}
	if ra <= rb {
		return a
	}
	return b
}

// Ask says when a human is asked before a command runs.
type Ask string

// Ask modes, from least to most asking.
const (
	AskOff    Ask = "off"     // never ask
	AskOnMiss Ask = "on-miss" // ask when the allowlist is not satisfied
	AskAlways Ask = "always"  // always ask
)

var askOrder = []Ask{AskOff, AskOnMiss, AskAlways}

// ParseAsk parses an ask mode name (exact, case-sensitive).
func ParseAsk(s string) (Ask, error) {
	for _, m := range askOrder {
		if string(m) == s {
			return m, nil
		}
	}
	return "", &ModeError{Kind: "ask", Value: s, Valid: names(askOrder)}
}

func (a Ask) rank() int { return slices.Index(askOrder, a) }

// Valid reports whether a is one of the three ask modes.
func (a Ask) Valid() bool { return a.rank() >= 0 }

// MaxAsk returns the more asking of a and b. An invalid value counts as
// always (fail closed).
func MaxAsk(a, b Ask) Ask {
	ra, rb := a.rank(), b.rank()
	if ra < 0 || rb < 0 {
		return AskAlways
	}
	if ra >= rb {
		return a
	}
	return b
}

// ParseAskFallback parses the askFallback setting: what happens when an
// approval request expires undecided. It takes security mode names: deny
// (default), allowlist (run only if the allowlist is satisfied), full (run).
// The empty string means deny.
func ParseAskFallback(s string) (Security, error) {
	if s == "" {
		return SecurityDeny, nil
	}
	m, err := ParseSecurity(s)
	if err != nil {
		return "", &ModeError{Kind: "askFallback", Value: s, Valid: names(securityOrder)}
	}
	return m, nil
}

// ElevatedLevel is what an elevated request turns into.
type ElevatedLevel string

// Elevated levels. ElevatedAsk runs on the gateway with the normal guard;
// ElevatedFull runs on the gateway with security full and ask off.
const (
	ElevatedOff  ElevatedLevel = "off"
	ElevatedAsk  ElevatedLevel = "ask"
	ElevatedFull ElevatedLevel = "full"
)

// ParseElevatedLevel parses an elevated level; "on" is accepted as an alias
// of "ask" (OpenClaw's spelling).
func ParseElevatedLevel(s string) (ElevatedLevel, error) {
	switch s {
	case "off":
		return ElevatedOff, nil
	case "ask", "on":
		return ElevatedAsk, nil
	case "full":
		return ElevatedFull, nil
	}
	return "", &ModeError{Kind: "elevated level", Value: s, Valid: []string{"off", "ask", "on", "full"}}
}

// EffectiveModes combines configuration and request as docs/tools.md says: a
// request can only lower security (min) and only raise ask (max); elevated
// full forces security full and ask off. Empty request values mean "not
// given".
func EffectiveModes(cfgSec, reqSec Security, cfgAsk, reqAsk Ask, lvl ElevatedLevel) (Security, Ask) {
	if lvl == ElevatedFull {
		return SecurityFull, AskOff
	}
	sec := cfgSec
	if reqSec != "" {
		sec = MinSecurity(cfgSec, reqSec)
	}
	if !sec.Valid() {
		sec = SecurityDeny
	}
	ask := cfgAsk
	if reqAsk != "" {
		ask = MaxAsk(cfgAsk, reqAsk)
	}
	if !ask.Valid() {
		ask = AskAlways
	}
	return sec, ask
}
