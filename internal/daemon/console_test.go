package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/envknob"
)

// TestConsoleVet checks the console's vet on the socket against real
// processes: the forwarder (the peer) and every browser process it names
// must pass the approver check; a name that is missing, empty or not a pid
// is refused.
func TestConsoleVet(t *testing.T) {
	if _, tagged := os.LookupEnv(string(envknob.RunTag)); tagged {
		t.Skip("this test process runs under a sandboxctl command: it is no person")
	}
	person := startChild(t, []string{"PATH=/usr/bin:/bin"})
	tagged := startChild(t, []string{"PATH=/usr/bin:/bin", string(envknob.RunTag) + "=a-command"})
	vet := consoleVet(approverCheck{self: notADaemon, uid: os.Geteuid(), proc: "/proc"})
	peer := Peer{PID: os.Getpid(), UID: os.Geteuid()}
	p, tp := strconv.Itoa(person.Process.Pid), strconv.Itoa(tagged.Process.Pid)
	for _, tc := range []struct {
		name   string
		peer   *Peer
		header *string
		ok     bool
	}{
		{"socket client itself", &peer, nil, true},
		{"no peer credentials", nil, nil, false},
		{"forwarded person", &peer, &p, true},
		{"forwarded command", &peer, &tp, false},
		{"forwarded person and command", &peer, ptr(p + "," + tp), false},
		{"forwarder could not tell", &peer, ptr(""), false},
		{"not a pid", &peer, ptr("x"), false},
		{"pid zero", &peer, ptr("0"), false},
		{"tagged forwarder", &Peer{PID: tagged.Process.Pid, UID: os.Geteuid()}, &p, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/ui/api/approvals/x", nil)
			if tc.peer != nil {
				r = r.WithContext(context.WithValue(r.Context(), peerKey{}, *tc.peer))
			}
			if tc.header != nil {
				r.Header.Set(api.ConsoleClientPIDsHeader, *tc.header)
			}
			err := vet(r)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrNotApprover) {
				t.Fatalf("want ErrNotApprover, got %v", err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestSecurityForwardedRequestsReachOnlyTheConsole: a request `sandboxctl
// ui` forwarded (it carries the browser's pids) reaches the console and
// nothing else of the socket's API, however its path is spelled; requests
// of socket clients themselves are untouched.
func TestSecurityForwardedRequestsReachOnlyTheConsole(t *testing.T) {
	served := 0
	h := consoleForwardOnly(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	for _, tc := range []struct {
		method, path string
		forwarded    bool
		want         int
	}{
		{"POST", "/v1/approvals/x", true, http.StatusForbidden},
		{"POST", "/v1/ui/login", true, http.StatusForbidden},
		{"POST", "/v1/tools/exec", true, http.StatusForbidden},
		{"POST", "/ui/../v1/approvals/x", true, http.StatusForbidden},
		{"GET", "/ui", true, http.StatusOK},
		{"GET", "/ui/api/me", true, http.StatusOK},
		{"POST", "/ui/api/approvals/x", true, http.StatusOK},
		{"POST", "/v1/approvals/x", false, http.StatusOK},
	} {
		served = 0
		r := httptest.NewRequest(tc.method, "http://sandboxctl/", nil)
		r.URL.Path = tc.path
		if tc.forwarded {
			r.Header.Set(api.ConsoleClientPIDsHeader, "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want || (tc.want == http.StatusOK) != (served == 1) {
			t.Errorf("%s %s forwarded=%v: %d (served %d), want %d: %s", tc.method, tc.path, tc.forwarded, w.Code, served, tc.want, w.Body)
		}
	}
}
