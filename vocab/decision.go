package vocab

// Decision is a guard's verdict on one command.
type Decision string

// Decisions.
const (
	DecisionRun             Decision = "run"              // run it (perhaps a rewritten command)
	DecisionDeny            Decision = "deny"             // refuse it
	DecisionApprovalPending Decision = "approval-pending" // a human must decide first
)

// ApprovalDecision is a human's answer to a pending approval request.
type ApprovalDecision string

// Approval decisions.
const (
	AllowOnce   ApprovalDecision = "allow-once"
	AllowAlways ApprovalDecision = "allow-always"
	DenyOnce    ApprovalDecision = "deny"
)

var approvalDecisions = []ApprovalDecision{AllowOnce, AllowAlways, DenyOnce}

// ParseApprovalDecision parses allow-once, allow-always or deny (exact).
func ParseApprovalDecision(s string) (ApprovalDecision, error) {
	for _, d := range approvalDecisions {
		if string(d) == s {
			return d, nil
		}
	}
	return "", &ModeError{Kind: "decision", Value: s, Valid: names(approvalDecisions)}
}
