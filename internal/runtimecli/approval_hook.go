package runtimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// approvalHook runs the operator's program (exec.approvalHook) for every
// approval request published on the Manager's event stream. The program
// gets the request as JSON on stdin and no shell; its first output line,
// allow-once, allow-always or deny, decides the request. Anything else (or
// a failure, or no answer within the approval timeout) leaves the request
// to a human, and is logged.
type approvalHook struct {
	path    string
	timeout time.Duration
	resolve func(ctx context.Context, id string, d vocab.ApprovalDecision) error
	logf    func(format string, args ...any)
}

func (h *approvalHook) run(ctx context.Context, events <-chan api.Event) {
	for ev := range events {
		if ev.Type != "approval" {
			continue
		}
		id := ev.Details.ApprovalID
		if id == "" {
			continue
		}
		go h.decide(ctx, id, ev)
	}
}

func (h *approvalHook) decide(ctx context.Context, id string, ev api.Event) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	in, _ := json.Marshal(api.ApprovalHookInput{ApprovalID: id, AgentID: ev.AgentID, SessionKey: ev.SessionKey, Details: ev.Details})
	cmd := exec.CommandContext(ctx, h.path)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		h.logf("approval hook %s for %s: %v; left to a human", h.path, id, err)
		return
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	d, err := vocab.ParseApprovalDecision(strings.TrimSpace(line))
	if err != nil {
		h.logf("approval hook %s for %s answered %q (%v); left to a human", h.path, id, line, err)
		return
	}
	if err := h.resolve(ctx, id, d); err != nil {
		h.logf("approval hook decision %s for %s: %v", d, id, err)
		return
	}
	h.logf("approval %s: %s by the approval hook", id, d)
}
