package daemon

import (
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/console"
)

// consoleVet holds the web console on the socket to the approval API's
// rule before a login with a one-time code and before every decision: the
// peer (`sandboxctl ui`, or a client of the socket itself) must be allowed
// to decide approvals, and so must every process the forwarder names as
// the browser's (api.ConsoleClientPIDsHeader). A command sandboxctl
// started that got hold of a login link or a session cookie and uses it
// through `sandboxctl ui` is refused like on the approval API.
func consoleVet(check approverCheck) func(*http.Request) error {
	return func(r *http.Request) error {
		p, _ := PeerFrom(r.Context())
		if err := check.check(p); err != nil {
			return err
		}
		vals, forwarded := r.Header[http.CanonicalHeaderKey(api.ConsoleClientPIDsHeader)]
		if !forwarded {
			return nil // the peer is the client
		}
		if len(vals) != 1 || vals[0] == "" {
			return refuse("the console's forwarder could not tell which process connected to it")
		}
		for _, f := range strings.Split(vals[0], ",") {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 0 {
				return refuse("the console's forwarder named %q, not a pid", f)
			}
			// The forwarder saw the socket owned by its own uid, which is
			// the peer's.
			if err := check.check(Peer{PID: pid, UID: p.UID}); err != nil {
				return fmt.Errorf("the browser's process (through sandboxctl ui): %w", err)
			}
		}
		return nil
	}
}

// consoleForwardOnly refuses, on the socket, a request that `sandboxctl ui`
// forwarded (it names the browser's processes) for anything but the
// console: the forwarder's peer credentials are the person's, so the
// approval API, the login-code route or the tool API reached through its
// port would take any local process's request as the person's. The
// forwarder passes on the console only; this holds even for one that does
// not.
func consoleForwardOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, forwarded := r.Header[http.CanonicalHeaderKey(api.ConsoleClientPIDsHeader)]
		if forwarded && !strings.HasPrefix(path.Clean(r.URL.Path)+"/", console.Prefix) {
			writeError(w, http.StatusForbidden, refuse("%s %s came through sandboxctl ui, which forwards the web console only", r.Method, r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}
