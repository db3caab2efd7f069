// Package policy is the audit trail's policy as a configuration sets it
// (docs/audit.md): what happens when a record cannot be written
// (FailureMode, audit.onFailure) and how much of the trail is kept (the
// defaults of audit.maxSegmentBytes and audit.maxBytes). It stands apart
// from the log (package audit) so that reading a configuration links
// none of the log's hashing and signing: the light CLI reads one on every
// command.
package policy

import "fmt"

// Defaults of audit.maxSegmentBytes and audit.maxBytes.
const (
	DefaultMaxSegmentBytes = 16 << 20
	DefaultMaxBytes        = 1 << 30
)

// FailureMode is what the daemon does when a record cannot be written
// (audit.onFailure).
type FailureMode string

// Failure modes.
const (
	// Refuse: commands (and file transfers) are refused while their
	// record cannot be written.
	Refuse FailureMode = "refuse"
	// Alert: everything goes on; the failure is logged and counted
	// (sandboxctl_audit_write_failures_total, sandboxctl_audit_healthy 0).
	Alert FailureMode = "alert"
)

// ParseFailureMode parses audit.onFailure.
func ParseFailureMode(s string) (FailureMode, error) {
	switch m := FailureMode(s); m {
	case Refuse, Alert:
		return m, nil
	}
	return "", fmt.Errorf("%q: want refuse or alert", s)
}
