package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Approvals are the approval requests of the gateway and of the connected
// nodes. Listing is a tool route (behind the daemon's token on TCP; a
// pinned caller sees its agent's only); deciding is for people only: on
// the socket a peer that is not a process sandboxctl started
// (approverCheck), on TCP the approver token (see Options.ApproverToken).
type Approvals interface {
	// List lists every request, newest first.
	List(ctx context.Context) ([]api.Approval, error)
	// Decide records a decision. An unknown id is NotFound; one that
	// expired, was decided or cancelled, or a slug that names several, is
	// Conflict (containerd errdefs classes).
	Decide(ctx context.Context, id string, d vocab.ApprovalDecision) error
}

// approvalRoutes serve Approvals.
type approvalRoutes struct{ a Approvals }

// list answers GET /v1/approvals; a client pinned to an agent (an agent
// token) sees that agent's requests only.
func (h approvalRoutes) list(w http.ResponseWriter, r *http.Request) {
	list, err := h.a.List(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if pin, ok := PinFrom(r.Context()); ok {
		// A copy: the list may be the service's own.
		list = slices.DeleteFunc(slices.Clone(list), func(v api.Approval) bool { return v.AgentID != pin.AgentID })
	}
	writeJSON(w, http.StatusOK, list)
}

// decide answers POST /v1/approvals/{id}; the caller was vetted.
func (h approvalRoutes) decide(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body api.ResolveRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: "approvals: body must be {\"decision\": \"allow-once|allow-always|deny\"}: " + err.Error()})
		return
	}
	d, err := vocab.ParseApprovalDecision(body.Decision)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	err = h.a.Decide(r.Context(), id, d)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, api.ApprovalDecided{ID: id, Decision: string(d)})
	case cerrdefs.IsNotFound(err):
		writeError(w, http.StatusNotFound, err)
	case cerrdefs.IsConflict(err):
		writeError(w, http.StatusConflict, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}
