package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Approvals lists the approval requests of every connected node (pending
// and recently decided ones, with their status). Nodes that cannot answer
// are reported in the error; the list holds the others'.
func (r *Registry) Approvals(ctx context.Context) ([]Approval, error) {
	var out []Approval
	var errs []error
	for _, l := range r.links() {
		f, err := l.rpc(ctx, &frame{Type: frameApprovalsList})
		if err == nil && f.Error != "" {
			err = errors.New(f.Error)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", l.name(), err))
			continue
		}
		for _, a := range f.Approvals {
			a.NodeID, a.Node = l.nodeID(), l.name()
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAtMs > out[j].CreatedAtMs })
	return out, errors.Join(errs...)
}

// AwaitApproval polls node's approvals every interval until the one with id
// is no longer pending, and returns its status: the decision (allow-once,
// allow-always, deny, possibly with " (used)") or "expired". A node that
// has no such approval (it forgot it, or restarted) is an error.
func (r *Registry) AwaitApproval(ctx context.Context, node, id string, interval time.Duration) (string, error) {
	for {
		e, err := r.lookup(node)
		if err != nil {
			return "", err
		}
		l, _ := r.currentLink(e)
		if l != nil {
			f, err := l.rpc(ctx, &frame{Type: frameApprovalsList})
			if err == nil && f.Error != "" {
				err = errors.New(f.Error)
			}
			if err != nil {
				return "", fmt.Errorf("node %s: %w", node, err)
			}
			found := false
			for _, a := range f.Approvals {
				if a.ID != id {
					continue
				}
				found = true
				if a.Status != "pending" {
					return a.Status, nil
				}
			}
			if !found {
				return "", fmt.Errorf("node %s no longer has approval %s", node, id)
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(interval):
		}
	}
}

// ResolveApproval records a human decision (allow-once, allow-always, deny)
// for an approval id or slug on node ("" = ask every connected node). The
// agent then repeats the exec and the node runs it under that decision.
func (r *Registry) ResolveApproval(ctx context.Context, node, id string, decision vocab.ApprovalDecision) error {
	switch decision {
	case "allow-once", "allow-always", "deny":
	default:
		return fmt.Errorf("nodeexec: resolve approval: unknown decision %q (want allow-once, allow-always or deny)", decision)
	}
	var links []*gwLink
	if node != "" {
		e, err := r.lookup(node)
		if err != nil {
			return fmt.Errorf("nodeexec: resolve approval: %w", err)
		}
		l, _ := r.currentLink(e)
		if l == nil {
			return fmt.Errorf("nodeexec: resolve approval: %w: node %s", ErrNodeOffline, node)
		}
		links = []*gwLink{l}
	} else {
		links = r.links()
	}
	for _, l := range links {
		f, err := l.rpc(ctx, &frame{Type: frameApprovalsSolve, ApprovalID: id, Decision: string(decision)})
		if err != nil {
			return fmt.Errorf("nodeexec: resolve approval on %s: %w", l.name(), err)
		}
		switch {
		case f.Error == "":
			return nil
		case f.Reason == "unknown-approval":
			continue
		default:
			return fmt.Errorf("nodeexec: resolve approval %s on %s: %s", id, l.name(), f.Error)
		}
	}
	return fmt.Errorf("nodeexec: resolve approval: %w: %q on %s", ErrApprovalUnknown, id, orAll(node))
}

func orAll(node string) string {
	if node == "" {
		return "any connected node"
	}
	return "node " + node
}

// Which asks a node where it finds each program on its PATH ("" = not found).
func (r *Registry) Which(ctx context.Context, node string, names []string) (map[string]string, error) {
	e, err := r.lookup(node)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: which: %w", err)
	}
	l, _ := r.currentLink(e)
	if l == nil {
		return nil, fmt.Errorf("nodeexec: which: %w: node %s", ErrNodeOffline, node)
	}
	f, err := l.rpc(ctx, &frame{Type: frameWhich, Names: names})
	if err != nil {
		return nil, fmt.Errorf("nodeexec: which on %s: %w", l.name(), err)
	}
	if f.Error != "" {
		return nil, fmt.Errorf("nodeexec: which on %s: %s", l.name(), f.Error)
	}
	return f.Paths, nil
}
