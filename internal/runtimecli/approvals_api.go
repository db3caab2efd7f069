package runtimecli

import (
	"context"

	"errors"
	"fmt"
	cerrdefs "github.com/containerd/errdefs"
	"sort"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// approvalsAPI is the approvals of the gateway's store and of the
// connected nodes, as the daemon serves them (daemon.Approvals) and the
// approval hook decides them.
type approvalsAPI struct {
	store *guard.Store
	nodes *nodeexec.Registry // nil without node connections
	now   func() time.Time
	audit audit.Recorder // approval.decision records (who decided)
}

var _ daemon.Approvals = (*approvalsAPI)(nil)

// List implements daemon.Approvals.
func (a *approvalsAPI) List(ctx context.Context) ([]api.Approval, error) { return a.collect(ctx) }

// Decide implements daemon.Approvals: the store's errors get their
// errdefs class.
func (a *approvalsAPI) Decide(ctx context.Context, id string, d vocab.ApprovalDecision) error {
	err := a.decide(ctx, id, d)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, guard.ErrUnknownApproval):
		return classed{err, cerrdefs.ErrNotFound}
	case errors.Is(err, guard.ErrExpired), errors.Is(err, guard.ErrAlreadyDecided), errors.Is(err, guard.ErrCancelled), errors.Is(err, guard.ErrAmbiguousSlug):
		return classed{err, cerrdefs.ErrConflict}
	}
	return err
}

func (a *approvalsAPI) collect(ctx context.Context) ([]api.Approval, error) {
	list, err := a.store.List(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	out := make([]api.Approval, 0, len(list))
	for _, p := range list {
		out = append(out, api.NewApproval(p.View(now), "gateway", string(p.Host)))
	}
	if a.nodes != nil {
		remote, err := a.nodes.Approvals(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range remote {
			out = append(out, nodeApproval(p))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAtMs > out[j].CreatedAtMs })
	return out, nil
}

// decide records a decision on the gateway's store, or on the node that
// holds the request.
func (a *approvalsAPI) decide(ctx context.Context, id string, d vocab.ApprovalDecision) (err error) {
	if a.audit != nil {
		defer func() {
			rec := audit.Record{Kind: audit.KindApprovalDecide, Approval: &audit.Approval{ID: id, Decision: string(d)}}
			if err != nil {
				rec.Approval.Reason = err.Error()
			}
			_ = a.audit.Record(ctx, rec)
		}()
	}
	err = a.store.Resolve(ctx, id, d)
	if errors.Is(err, guard.ErrUnknownApproval) && a.nodes != nil {
		err = a.nodes.ResolveApproval(ctx, "", id, d)
		if errors.Is(err, nodeexec.ErrApprovalUnknown) {
			err = fmt.Errorf("%w: %s (not on the gateway nor on any connected node)", guard.ErrUnknownApproval, id)
		}
	}
	return err
}

// nodeApproval is a node's approval request as the approvals API lists
// it: waiting on the node (its name, else its id).
func nodeApproval(p nodeexec.Approval) api.Approval {
	where := p.Node
	if where == "" {
		where = p.NodeID
	}
	return api.NewApproval(p.ApprovalRequest, where, string(vocab.HostNode))
}
