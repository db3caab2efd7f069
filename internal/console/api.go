package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sandboxctl/sandboxctl/api"
)

// forwardGet answers with the daemon's own GET route.
func (c *Console) forwardGet(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		forward(w, r, c.opts.API, http.MethodGet, path, nil)
	}
}

func (c *Console) sandbox(w http.ResponseWriter, r *http.Request) {
	forward(w, r, c.opts.API, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(r.PathValue("name")), nil)
}

// audit is the newest records of the audit log (?agent=&kind=, at most
// 200), as GET /v1/audit answers them (one JSON object per line).
func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	q := url.Values{"last": {"200"}}
	for _, k := range []string{"agent", "kind"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	forward(w, r, c.opts.API, http.MethodGet, "/v1/audit?"+q.Encode(), nil)
}

// sandboxChange pauses, resumes, removes, snapshots, rolls back or forks
// a sandbox, or removes one of its snapshots (docs/sandboxes.md,
// docs/snapshots.md): for sessions that may decide (the operators) only.
// The body of snapshot, rollback and fork is decoded strictly and sent on
// as the daemon's route takes it.
func (c *Console) sandboxChange(w http.ResponseWriter, r *http.Request) {
	if !sessionFrom(r.Context()).canDecide {
		writeError(w, http.StatusForbidden, ErrViewOnly)
		return
	}
	path := "/v1/sandboxes/" + url.PathEscape(r.PathValue("name"))
	method := r.Method
	var body []byte
	switch {
	case method == http.MethodDelete && r.PathValue("snapshot") != "":
		path += "/snapshots/" + url.PathEscape(r.PathValue("snapshot"))
	case method == http.MethodPost:
		var req any
		switch action := r.PathValue("action"); action {
		case "pause", "resume":
			path += "/" + action
		case "snapshot":
			path += "/snapshots"
			req = &struct {
				Name string `json:"name,omitempty"`
			}{}
		case "rollback":
			path += "/rollback"
			req = &struct {
				Snapshot string `json:"snapshot"`
			}{}
		case "fork":
			path += "/fork"
			req = &struct {
				AgentID    string `json:"agentId,omitempty"`
				SessionKey string `json:"sessionKey,omitempty"`
				Snapshot   string `json:"snapshot,omitempty"`
			}{}
		default:
			writeError(w, http.StatusNotFound, fmt.Errorf("console: no sandbox action %q (pause, resume, snapshot, rollback, fork)", action))
			return
		}
		if req != nil {
			if err := decode(w, r, req); err != nil {
				writeError(w, http.StatusBadRequest, err)
				return
			}
			var err error
			if body, err = json.Marshal(req); err != nil {
				writeError(w, http.StatusInternalServerError, err)
				return
			}
		}
	}
	c.opts.Logf("console: %s %s", method, path)
	forward(w, r, c.opts.API, method, path, body)
}

// snapshots lists a sandbox's snapshots.
func (c *Console) snapshots(w http.ResponseWriter, r *http.Request) {
	forward(w, r, c.opts.API, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(r.PathValue("name"))+"/snapshots", nil)
}

// sessionList lists the sessions of one scope (?agentId=&sessionKey=).
func (c *Console) sessionList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.process(w, r, api.ProcessParams{Action: "list", AgentID: q.Get("agentId"), SessionKey: q.Get("sessionKey")})
}

// sessionLog is a session's output (?agentId=&sessionKey=&offset=&limit=,
// as the process tool's log action takes them).
func (c *Console) sessionLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := api.ProcessParams{Action: "log", SessionID: r.PathValue("id"), AgentID: q.Get("agentId"), SessionKey: q.Get("sessionKey")}
	for name, dst := range map[string]**int{"offset": &p.Offset, "limit": &p.Limit} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Errorf("console: %s=%q is not an integer", name, v))
				return
			}
			*dst = &n
		}
	}
	c.process(w, r, p)
}

func (c *Console) process(w http.ResponseWriter, r *http.Request, p api.ProcessParams) {
	body, err := json.Marshal(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	forward(w, r, c.opts.API, http.MethodPost, "/v1/tools/process", body)
}

// decide forwards a decision {"decision": "allow-once|allow-always|deny"}
// of a session that may decide.
func (c *Console) decide(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	if !s.canDecide {
		writeError(w, http.StatusForbidden, ErrViewOnly)
		return
	}
	var body struct {
		Decision string `json:"decision"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	fwd, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	id := r.PathValue("id")
	c.opts.Logf("console: decision %q on approval %s", body.Decision, id)
	forward(w, r, c.opts.Decide, http.MethodPost, "/v1/approvals/"+url.PathEscape(id), fwd)
}

// forward serves the daemon request the console makes for r with h.
// path is escaped by the caller; the daemon's routes decode it.
func forward(w http.ResponseWriter, r *http.Request, h http.Handler, method, path string, body []byte) {
	r2, err := http.NewRequestWithContext(r.Context(), method, path, bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("console: %s %s: %w", method, path, err))
		return
	}
	r2.RemoteAddr = r.RemoteAddr
	if body != nil {
		r2.Header.Set("Content-Type", "application/json")
	}
	h.ServeHTTP(w, r2)
}
