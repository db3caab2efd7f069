package daemon

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/sandboxctl/sandboxctl/api"
)

// checkIdentity refuses (409) a request whose client asks for another
// configuration or Engine than this daemon serves (apiclient.SetIdentity),
// naming both and the fix: a command must never run silently under a
// configuration its caller did not ask for. Requests without the header
// (API clients, MCP) and the health check and shutdown, which a client
// needs to find and stop such a daemon, pass.
func (s *Server) checkIdentity(next http.Handler) http.Handler {
	own := s.opts.Identity
	if own.ConfigHash == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hash := r.Header.Get(api.HeaderConfigHash)
		if hash == "" || hash == own.ConfigHash || r.URL.Path == "/healthz" || r.URL.Path == "/v1/shutdown" {
			next.ServeHTTP(w, r)
			return
		}
		file, _ := url.QueryUnescape(r.Header.Get(api.HeaderConfigFile))
		engine, _ := url.QueryUnescape(r.Header.Get(api.HeaderEngine))
		writeError(w, http.StatusConflict, fmt.Errorf(
			"the daemon for %s (pid %d) serves config %s with engine %s, but this command asks for config %s with engine %s: stop it with 'sandboxctl serve stop' (the next command starts one with its own config), or use another --state",
			s.opts.StateDir, s.pid, describeConfig(own.ConfigFile, own.ConfigHash), describeEngine(own.Engine),
			describeConfig(file, hash), describeEngine(engine)))
	})
}

func describeConfig(file, hash string) string {
	if file == "" {
		file = "(built-in defaults)"
	}
	return fmt.Sprintf("%s (hash %s)", file, hash)
}

func describeEngine(e string) string {
	if e == "" {
		return "DOCKER_HOST unset (the Docker default)"
	}
	return "DOCKER_HOST=" + e
}
