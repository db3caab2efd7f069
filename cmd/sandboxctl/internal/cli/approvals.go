package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/nodeexec"
)

// ApprovalView is one approval request as GET /v1/approvals lists it: the
// gateway's own (where "gateway") and those pending on nodes.
type ApprovalView struct {
	ID          string   `json:"id"`
	Slug        string   `json:"slug"`
	Where       string   `json:"where"` // "gateway" or the node's name
	Host        string   `json:"host"`
	Command     string   `json:"command"`
	Argv        []string `json:"argv,omitempty"`
	Cwd         string   `json:"cwd"`
	AgentID     string   `json:"agentId,omitempty"`
	SessionKey  string   `json:"sessionKey,omitempty"`
	Explain     string   `json:"explain,omitempty"`
	CreatedAtMs int64    `json:"createdAtMs,omitempty"`
	ExpiresAtMs int64    `json:"expiresAtMs"`
	Status      string   `json:"status"`
}

// ResolveRequest is the body of POST /v1/approvals/{id}.
type ResolveRequest struct {
	Decision string `json:"decision"`
}

// approvalsAPI serves the approvals of the gateway's store and of the
// connected nodes. It is mounted behind the daemon's token on TCP.
type approvalsAPI struct {
	store *guard.Store
	nodes *nodeexec.Registry // nil without node connections
	now   func() time.Time
}

func (a *approvalsAPI) routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /v1/approvals":       http.HandlerFunc(a.list),
		"POST /v1/approvals/{id}": http.HandlerFunc(a.resolve),
	}
}

func (a *approvalsAPI) collect(ctx context.Context) ([]ApprovalView, error) {
	list, err := a.store.List(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	out := make([]ApprovalView, 0, len(list))
	for _, p := range list {
		out = append(out, ApprovalView{ID: p.ID, Slug: p.Slug, Where: "gateway", Host: p.Host, Command: p.Command, Argv: p.Argv,
			Cwd: p.Cwd, AgentID: p.AgentID, SessionKey: p.SessionKey, Explain: p.Explain,
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
			out = append(out, ApprovalView{ID: p.ID, Slug: p.Slug, Where: where, Host: "node", Command: p.Command, Argv: p.Argv,
				Cwd: p.Cwd, AgentID: p.AgentID, SessionKey: p.SessionKey, Explain: p.Explain,
				CreatedAtMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs, Status: p.Status})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAtMs > out[j].CreatedAtMs })
	return out, nil
}

func (a *approvalsAPI) list(w http.ResponseWriter, r *http.Request) {
	list, err := a.collect(r.Context())
	if err != nil {
		replyJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	replyJSON(w, http.StatusOK, list)
}

func (a *approvalsAPI) resolve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body ResolveRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": "approvals: body must be {\"decision\": \"allow-once|allow-always|deny\"}: " + err.Error()})
		return
	}
	d, err := guard.ParseDecision(body.Decision)
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
	case errors.Is(err, guard.ErrExpired), errors.Is(err, guard.ErrAlreadyDecided), errors.Is(err, guard.ErrAmbiguousSlug):
		replyJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	default:
		replyJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

// decide records a decision on the gateway's store, or on the node that
// holds the request.
func (a *approvalsAPI) decide(ctx context.Context, id string, d guard.ApprovalDecision) error {
	err := a.store.Resolve(ctx, id, d)
	if errors.Is(err, guard.ErrUnknownApproval) && a.nodes != nil {
		err = a.nodes.ResolveApproval(ctx, "", id, string(d))
		if errors.Is(err, nodeexec.ErrApprovalUnknown) {
			err = fmt.Errorf("%w: %s (not on the gateway nor on any connected node)", guard.ErrUnknownApproval, id)
		}
	}
	return err
}

func replyJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func newApprovalsCommand(c *CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide approval requests (the gateway's and its nodes')",
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List approval requests, newest first",
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return RunApprovalsList(cmd.Context(), c) },
	}, &cobra.Command{
		Use:   "resolve ID allow-once|allow-always|deny",
		Short: "Decide an approval request (by id or slug)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunApprovalsResolve(cmd.Context(), c, args[0], args[1])
		},
	})
	return cmd
}

// RunApprovalsList prints the approval requests the daemon knows.
func RunApprovalsList(ctx context.Context, c *CLI) error {
	raw, done, err := c.callDaemon(ctx, http.MethodGet, "/v1/approvals", nil)
	if err != nil || done {
		return err
	}
	var list []ApprovalView
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("approvals list: %w", err)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(c.Out, "no approval requests")
		return err
	}
	tw := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWHERE\tSTATUS\tAGENT\tEXPIRES\tCWD\tCOMMAND")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Where, a.Status, a.AgentID,
			time.UnixMilli(a.ExpiresAtMs).Format(time.TimeOnly), a.Cwd, a.Command)
	}
	return tw.Flush()
}

// RunApprovalsResolve records a decision.
func RunApprovalsResolve(ctx context.Context, c *CLI, id, decision string) error {
	if _, err := guard.ParseDecision(decision); err != nil {
		return usageErrorf("approvals resolve: %v", err)
	}
	_, done, err := c.callDaemon(ctx, http.MethodPost, "/v1/approvals/"+id, ResolveRequest{Decision: decision})
	if err != nil || done {
		return err
	}
	_, err = fmt.Fprintf(c.Out, "%s: %s\n", id, decision)
	return err
}

// callDaemon sends one request to the state directory's daemon (starting
// it when none runs). With --json it prints the answer as is and reports
// done, so the caller only formats for people.
func (c *CLI) callDaemon(ctx context.Context, method, path string, body any) (raw json.RawMessage, done bool, err error) {
	cfg, err := c.LoadConfig()
	if err != nil {
		return nil, false, err
	}
	client, err := c.Client(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	if raw, err = client.Call(ctx, method, path, body); err != nil {
		return nil, false, err
	}
	if c.JSON {
		_, err := fmt.Fprintln(c.Out, strings.TrimSpace(string(raw)))
		return raw, true, err
	}
	return raw, false, nil
}
