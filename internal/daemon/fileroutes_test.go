package daemon

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

// recordingStore records which agent each call reached. A fake is fine
// here: the claim under test is the routing and scoping of the handlers;
// the real store is tested against Docker (sandbox, cmd/sandboxctl).
type recordingStore struct {
	mu     sync.Mutex
	agents []string
}

func (s *recordingStore) saw(f api.FileRef) {
	s.mu.Lock()
	s.agents = append(s.agents, f.AgentID)
	s.mu.Unlock()
}

func (s *recordingStore) Stat(_ context.Context, f api.FileRef) (api.FileInfo, error) {
	s.saw(f)
	return api.FileInfo{Name: "x", Path: f.Path, Type: "file"}, nil
}

func (s *recordingStore) List(_ context.Context, f api.FileRef) (api.FileList, error) {
	s.saw(f)
	return api.FileList{Path: f.Path}, nil
}

func (s *recordingStore) Read(_ context.Context, f api.FileRef, _ int64, w io.Writer) error {
	s.saw(f)
	return nil
}

func (s *recordingStore) WriteTar(_ context.Context, f api.FileRef, _ int64, r io.Reader) error {
	s.saw(f)
	_, err := io.Copy(io.Discard, r)
	return err
}

func (s *recordingStore) WriteFile(_ context.Context, f api.FileRef, _ fs.FileMode, _ int64, r io.Reader) error {
	s.saw(f)
	_, err := io.Copy(io.Discard, r)
	return err
}

func (s *recordingStore) Remove(_ context.Context, f api.FileRef) error {
	s.saw(f)
	return nil
}

func serveFileRoute(t *testing.T, routes map[string]http.Handler, pin *Pin, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	for p, h := range routes {
		mux.Handle(p, h)
	}
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if pin != nil {
		req = req.WithContext(context.WithValue(req.Context(), pinKey{}, *pin))
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

// TestSecurityFilesAgentTokenReachesOnlyItsSandbox: a client holding
// alice's agent token names bob in every files route; each is refused with
// 403 and the store never sees bob. Without an agent, the call is alice's.
func TestSecurityFilesAgentTokenReachesOnlyItsSandbox(t *testing.T) {
	store := &recordingStore{}
	routes := FileRoutes(store, FileRoutesOptions{})
	alice := &Pin{AgentID: "alice"}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/files"}, {"PUT", "/v1/files"}, {"DELETE", "/v1/files"},
		{"GET", "/v1/files/stat"}, {"GET", "/v1/files/list"},
	} {
		rec := serveFileRoute(t, routes, alice, c.method, c.path+"?agent=bob&path=/workspace/x", "data")
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "only its own agent") {
			t.Errorf("%s %s as alice for bob: %d %s", c.method, c.path, rec.Code, rec.Body.String())
		}
	}
	if len(store.agents) != 0 {
		t.Fatalf("the store was reached for %v", store.agents)
	}
	if rec := serveFileRoute(t, routes, alice, "GET", "/v1/files/stat?path=/workspace/x", ""); rec.Code != 200 {
		t.Fatalf("alice's own stat: %d %s", rec.Code, rec.Body.String())
	}
	if len(store.agents) != 1 || store.agents[0] != "alice" {
		t.Fatalf("calls reached %v, want [alice]", store.agents)
	}
}

func TestFileRoutesInput(t *testing.T) {
	store := &recordingStore{}
	routes := FileRoutes(store, FileRoutesOptions{MaxBytes: 10})
	for _, c := range []struct {
		method, target, body string
		want                 int
		msg                  string
	}{
		{"GET", "/v1/files?agent=a", "", 400, "path is required"},
		{"GET", "/v1/files?agent=a&path=/x&format=zip", "", 400, "want raw or tar"},
		{"PUT", "/v1/files?agent=a&path=/x&mode=999", "x", 400, "octal permission bits"},
		{"PUT", "/v1/files?agent=a&path=/x", strings.Repeat("x", 11), 413, "limit of 10 bytes"},
	} {
		rec := serveFileRoute(t, routes, nil, c.method, c.target, c.body)
		if rec.Code != c.want || !strings.Contains(rec.Body.String(), c.msg) {
			t.Errorf("%s %s: %d %s, want %d %q", c.method, c.target, rec.Code, rec.Body.String(), c.want, c.msg)
		}
	}
	if len(store.agents) != 0 {
		t.Fatalf("bad input reached the store: %v", store.agents)
	}
}
