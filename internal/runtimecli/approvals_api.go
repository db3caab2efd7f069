package runtimecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// approvalsAPI serves the approvals of the gateway's store and of the
// connected nodes. Listing is a tool route (behind the daemon's token on
// TCP); deciding is an approval route, which the daemon serves only to a
// human (see daemon.Options.ApprovalRoutes).
type approvalsAPI struct {
	store *guard.Store
	nodes *nodeexec.Registry // nil without node connections
	now   func() time.Time
	audit audit.Recorder // approval.decision records (who decided)
}

// routes are the tool routes: the list.
func (a *approvalsAPI) routes() map[string]http.Handler {
	return map[string]http.Handler{"GET /v1/approvals": http.HandlerFunc(a.list)}
}

// decisionRoutes decide approvals.
func (a *approvalsAPI) decisionRoutes() map[string]http.Handler {
	return map[string]http.Handler{"POST /v1/approvals/{id}": http.HandlerFunc(a.resolve)}
}

func (a *approvalsAPI) collect(ctx context.Context) ([]api.Approval, error) {
	list, err := a.store.List(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	out := make([]api.Approval, 0, len(list))
	for _, p := range list {
		out = append(out, api.Approval{ID: p.ID, Slug: p.Slug, Where: "gateway", Host: string(p.Host), Command: p.Command, Argv: p.Argv,
			Shell: argv0(p.Argv), Env: p.Env, Cwd: p.Cwd, AgentID: p.AgentID, SessionKey: p.SessionKey, Explain: p.Explain,
			CreatedAtMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs, Status: p.Status(now)})
	}
	if a.nodes != nil {
		remote, err := a.nodes.Approvals(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range remote {
			where := p.Node
			if where == "" {
				where = p.NodeID
			}
			out = append(out, api.Approval{ID: p.ID, Slug: p.Slug, Where: where, Host: "node", Command: p.Command, Argv: p.Argv,
				Shell: argv0(p.Argv), Env: p.Env, Cwd: p.Cwd, AgentID: p.AgentID, SessionKey: p.SessionKey, Explain: p.Explain,
				CreatedAtMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs, Status: p.Status})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAtMs > out[j].CreatedAtMs })
	return out, nil
}

// list answers GET /v1/approvals; a client pinned to an agent (an agent
// token) sees that agent's requests only.
func (a *approvalsAPI) list(w http.ResponseWriter, r *http.Request) {
	list, err := a.collect(r.Context())
	if err != nil {
		replyJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	if pin, ok := daemon.PinFrom(r.Context()); ok {
		list = slices.DeleteFunc(list, func(v api.Approval) bool { return v.AgentID != pin.AgentID })
	}
	replyJSON(w, http.StatusOK, list)
}

func (a *approvalsAPI) resolve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body api.ResolveRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": "approvals: body must be {\"decision\": \"allow-once|allow-always|deny\"}: " + err.Error()})
		return
	}
	d, err := vocab.ParseApprovalDecision(body.Decision)
	if err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	err = a.decide(r.Context(), id, d)
	switch {
	case err == nil:
		replyJSON(w, http.StatusOK, map[string]string{"id": id, "decision": string(d)})
	case errors.Is(err, guard.ErrUnknownApproval):
		replyJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case errors.Is(err, guard.ErrExpired), errors.Is(err, guard.ErrAlreadyDecided), errors.Is(err, guard.ErrCancelled), errors.Is(err, guard.ErrAmbiguousSlug):
		replyJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	default:
		replyJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
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

func argv0(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

func replyJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
