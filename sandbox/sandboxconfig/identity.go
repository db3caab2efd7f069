package sandboxconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// IdentityConfig is sandbox.identity: the ids sandboxes run under when the
// daemon runs as root and sandbox.docker.user is empty. Each sandbox takes
// a pair from UIDRange (as uid and gid): one for its commands (which own
// its workspace), one for its supervisor. No host account may use any id
// of the range (checked at daemon start against /etc/passwd, /etc/group,
// /etc/subuid and /etc/subgid).
type IdentityConfig struct {
	// UIDRange is "FIRST-LAST" (inclusive); "" is DefaultUIDRange.
	UIDRange string `yaml:"uidRange" json:"uidRange,omitempty"`
}

// DefaultUIDRange is far above the ids of host accounts (Debian gives
// users 1000-59999 and subordinate ranges from 100000) and below 2^31, so
// tools that keep uids in a signed 32-bit int show them right.
const DefaultUIDRange = "2000000000-2000999999"

// UIDRange is a parsed sandbox.identity.uidRange: First..Last inclusive.
type UIDRange struct {
	First, Last uint32
}

// Slots is how many sandboxes the range serves (two ids each).
func (r UIDRange) Slots() uint32 { return (r.Last - r.First + 1) / 2 }

// Contains reports whether id is in the range.
func (r UIDRange) Contains(id uint32) bool { return id >= r.First && id <= r.Last }

// Overlaps reports whether [first, first+count) meets the range.
func (r UIDRange) Overlaps(first, count uint64) bool {
	return count > 0 && first <= uint64(r.Last) && first+count-1 >= uint64(r.First)
}

func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// ParseUIDRange parses sandbox.identity.uidRange ("" is DefaultUIDRange):
// at least 2 ids, none of them 0, 65534 (nobody) or 2^32-1 (the kernel's
// "no id").
func ParseUIDRange(s string) (UIDRange, error) {
	const field = "sandbox.identity.uidRange"
	if s == "" {
		s = DefaultUIDRange
	}
	bad := func(msg string) (UIDRange, error) {
		return UIDRange{}, &ConfigError{Field: field, Value: s, Msg: msg}
	}
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return bad("want FIRST-LAST, such as " + DefaultUIDRange)
	}
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if err1 != nil || err2 != nil {
		return bad("FIRST and LAST must be ids between 1 and 4294967294")
	}
	r := UIDRange{First: uint32(first), Last: uint32(last)}
	switch {
	case r.First == 0:
		return bad("must not include 0 (root)")
	case r.Last == 1<<32-1:
		return bad("must not include 4294967295 (the kernel's \"no id\")")
	case r.Last <= r.First:
		return bad("LAST must be above FIRST: each sandbox takes two ids")
	case r.Contains(65534):
		return bad("must not include 65534 (nobody)")
	}
	return r, nil
}
