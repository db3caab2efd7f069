package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// fakeSandboxes records which scopes exist; the file calls are not used
// by these tests (the SDK test covers them against real sandboxes).
type fakeSandboxes struct {
	mu     sync.Mutex
	scopes map[sandbox.Scope]bool
	files  []api.FileInfo // what ListFiles answers, for any directory
	// templates lists the templates Create was asked for.
	templates []string
	// explicit makes Ensure refuse to create (sandbox.explicit).
	explicit bool
}

func (f *fakeSandboxes) Ensure(_ context.Context, s sandbox.Scope) (sandbox.EnsureResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.explicit && !f.scopes[s] {
		return sandbox.EnsureResult{}, sandbox.ErrNoSandbox
	}
	f.scopes[s] = true
	return sandbox.EnsureResult{}, nil
}

func (f *fakeSandboxes) Create(_ context.Context, s sandbox.Scope, o sandbox.CreateOptions) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes[s] = true
	f.templates = append(f.templates, o.Template)
	return sandbox.Info{}, nil
}

func (f *fakeSandboxes) Remove(_ context.Context, s sandbox.Scope) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.scopes[s] {
		return cerrdefs.ErrNotFound
	}
	delete(f.scopes, s)
	return nil
}

func (f *fakeSandboxes) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.scopes)
}

func (f *fakeSandboxes) StatFile(context.Context, sandbox.Scope, string) (api.FileInfo, error) {
	return api.FileInfo{}, cerrdefs.ErrNotFound
}

func (f *fakeSandboxes) ListFiles(_ context.Context, _ sandbox.Scope, dir string) (api.FileList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		return api.FileList{}, cerrdefs.ErrNotFound
	}
	return api.FileList{Path: dir, Entries: append([]api.FileInfo(nil), f.files...)}, nil
}

func (f *fakeSandboxes) setFiles(files ...api.FileInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files = files
}

func (f *fakeSandboxes) ReadFiles(context.Context, sandbox.Scope, string, int64, io.Writer) error {
	return cerrdefs.ErrNotFound
}

func (f *fakeSandboxes) WriteFile(context.Context, sandbox.Scope, string, fs.FileMode, int64, io.Reader) error {
	return cerrdefs.ErrNotFound
}

func (f *fakeSandboxes) RemoveFile(context.Context, sandbox.Scope, string) error {
	return cerrdefs.ErrNotFound
}

type fakeTools struct{}

func (fakeTools) Exec(context.Context, api.ExecParams) (api.Result, error) {
	return api.Result{}, nil
}

func (fakeTools) Process(context.Context, api.ProcessParams) (api.Result, error) {
	return api.Result{}, nil
}

func (fakeTools) Follow(string, string, string) (toolapi.Follower, error) {
	return nil, api.ErrNoSession
}

func (fakeTools) FollowRaw(string, string, string) (toolapi.Follower, error) {
	return nil, api.ErrNoSession
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestServer(t *testing.T) (*Server, *fakeSandboxes, *clock, string) {
	t.Helper()
	sbx := &fakeSandboxes{scopes: map[sandbox.Scope]bool{}}
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	s, err := New(Options{Tools: fakeTools{}, Streams: fakeTools{}, Sandboxes: sbx, Sessions: func(string) []api.Details { return nil },
		AgentTokens: map[string]string{"alice-key": "alice", "bob-key": "bob"}, ScopeMode: "session", StateDir: t.TempDir(),
		Templates: func(name string) error {
			if name != "small" {
				return errors.New("no such template")
			}
			return nil
		}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, sbx, c, srv.URL
}

func call(t *testing.T, method, url, key string, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestE2BKeyScope: an API key reaches its own agent's sandboxes only, an
// envd token its own sandbox only, and bad input creates nothing.
func TestE2BKeyScope(t *testing.T) {
	_, sbx, _, url := newTestServer(t)
	code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", `{"templateID":"base","metadata":{"k":"v"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created sandboxResponse
	if err := json.Unmarshal(body, &created); err != nil || created.SandboxID == "" || created.EnvdAccessToken == "" {
		t.Fatalf("create: %v %s", err, body)
	}
	if !sbx.scopes[sandbox.Scope{AgentID: "alice", SessionKey: created.SandboxID}] {
		t.Fatalf("the sandbox is not alice's scope: %v", sbx.scopes)
	}
	id := created.SandboxID
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/sandboxes/" + id, ""},
		{"DELETE", "/sandboxes/" + id, ""},
		{"POST", "/sandboxes/" + id + "/timeout", `{"timeout":10}`},
		{"POST", "/v2/sandboxes/" + id + "/connect", `{"timeout":10}`},
		{"POST", "/sandboxes/" + id + "/pause", `{}`},
	} {
		if code, body := call(t, c.method, url+c.path, "bob-key", c.body); code != http.StatusNotFound {
			t.Errorf("bob %s %s: %d %s, want 404", c.method, c.path, code, body)
		}
		if code, _ := call(t, c.method, url+c.path, "", c.body); code != http.StatusUnauthorized {
			t.Errorf("no key %s %s: %d, want 401", c.method, c.path, code)
		}
	}
	if code, body := call(t, "GET", url+"/v2/sandboxes", "bob-key", ""); code != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("bob's list: %d %s", code, body)
	}
	if code, body := call(t, "GET", url+"/v2/sandboxes?metadata=k%3Dv", "alice-key", ""); code != http.StatusOK || !strings.Contains(string(body), id) {
		t.Errorf("alice's filtered list: %d %s", code, body)
	}
	if code, body := call(t, "GET", url+"/v2/sandboxes?metadata=k%3Dw", "alice-key", ""); code != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("alice's list filtered on another value: %d %s", code, body)
	}

	// envd: the sandbox's own token only.
	list := url + "/process.Process/List"
	if code, _ := call(t, "POST", list, "", "{}", "E2b-Sandbox-Id", id, "X-Access-Token", "alice-key"); code != http.StatusUnauthorized {
		t.Errorf("envd with the API key as token: %d, want 401", code)
	}
	if code, _ := call(t, "POST", list, "", "{}", "E2b-Sandbox-Id", id, "X-Access-Token", created.EnvdAccessToken); code != http.StatusOK {
		t.Errorf("envd with its token: %d, want 200", code)
	}
	if code, _ := call(t, "POST", list, "", "{}", "E2b-Sandbox-Id", "inone", "X-Access-Token", created.EnvdAccessToken); code != http.StatusBadGateway {
		t.Errorf("envd for an unknown sandbox: %d, want 502", code)
	}

	// Bad input: an error, and no sandbox.
	for _, b := range []string{`{"templateID":"nope"}`, `{"timeout":-1}`, `{"timeout":999999999}`, `{"timeout":"x"}`} {
		if code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", b); code < 400 || code >= 500 {
			t.Errorf("create %s: %d %s, want a 4xx", b, code, body)
		}
	}
	if n := sbx.count(); n != 1 {
		t.Errorf("bad creates left %d sandboxes, want 1", n)
	}
	// A named template is one of sandbox.templates, made by Create.
	if code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", `{"templateID":"small"}`); code != http.StatusCreated || !strings.Contains(string(body), `"templateID":"small"`) {
		t.Errorf("create from template small: %d %s", code, body)
	}
	if len(sbx.templates) != 1 || sbx.templates[0] != "small" {
		t.Errorf("Create was asked for %v, want [small]", sbx.templates)
	}
	if code, _ := call(t, "DELETE", url+"/sandboxes/"+id, "alice-key", ""); code != http.StatusNoContent {
		t.Errorf("alice's kill: %d", code)
	}
	if n := sbx.count(); n != 1 {
		t.Errorf("kill left %d sandboxes, want the template one", n)
	}
}

// TestE2BTimeout: a sandbox is removed once its timeout passed, and
// setTimeout moves that end.
func TestE2BTimeout(t *testing.T) {
	s, sbx, c, url := newTestServer(t)
	code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", `{"timeout":60}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created sandboxResponse
	_ = json.Unmarshal(body, &created)
	if code, _ := call(t, "POST", url+"/sandboxes/"+created.SandboxID+"/timeout", "alice-key", `{"timeout":120}`); code != http.StatusNoContent {
		t.Fatalf("setTimeout: %d", code)
	}
	c.add(90 * time.Second)
	s.reap(t.Context())
	if sbx.count() != 1 {
		t.Fatal("the sandbox was removed before its new end")
	}
	c.add(31 * time.Second)
	s.reap(t.Context())
	if sbx.count() != 0 {
		t.Fatal("the sandbox outlived its timeout")
	}
	if code, _ := call(t, "GET", url+"/sandboxes/"+created.SandboxID, "alice-key", ""); code != http.StatusNotFound {
		t.Errorf("info after the timeout: %d, want 404", code)
	}
}

func TestE2BWire(t *testing.T) {
	line, err := commandLine("/bin/bash", []string{"-l", "-c", "echo 'a b' $HOME"})
	if err != nil || line != `exec /bin/bash -l -c "echo 'a b' \$HOME"` {
		t.Errorf("commandLine: %q %v", line, err)
	}
	if _, err := commandLine("", nil); err == nil {
		t.Error("an empty cmd was accepted")
	}
	var req sendSignalRequest
	if err := json.Unmarshal([]byte(`{"process":{"pid":3},"signal":"SIGNAL_SIGKILL"}`), &req); err != nil || req.Signal != signalSIGKILL || *req.Process.PID != 3 {
		t.Errorf("signal by name: %+v %v", req, err)
	}
	if err := json.Unmarshal([]byte(`{"signal":15}`), &req); err != nil || req.Signal != signalSIGTERM {
		t.Errorf("signal by number: %+v %v", req, err)
	}
	if err := json.Unmarshal([]byte(`{"signal":"SIGNAL_BOGUS"}`), &req); err == nil {
		t.Error("an unknown signal name was accepted")
	}
	b, _ := json.Marshal(entryInfo{Size: 5, Type: fileTypeFile})
	if !strings.Contains(string(b), `"size":"5"`) || !strings.Contains(string(b), `"type":"FILE_TYPE_FILE"`) {
		t.Errorf("entry JSON: %s", b)
	}
	md, err := parseMetadataFilter("a%253Db=c%2526d&x=y")
	if err != nil || md["a=b"] != "c&d" || md["x"] != "y" {
		t.Errorf("metadata filter: %v %v", md, err)
	}
	code := 3
	if e := endOf(api.StreamFrame{ExitCode: &code}); e.ExitCode != 3 || !e.Exited {
		t.Errorf("end of exit 3: %+v", e)
	}
	if e := endOf(api.StreamFrame{Signal: "SIGKILL", Status: "failed"}); e.ExitCode != -1 || e.Exited || e.Error == nil {
		t.Errorf("end of a kill: %+v", e)
	}
}

type fakePauser struct {
	mu     sync.Mutex
	paused map[string]bool
	calls  []string
}

func (f *fakePauser) Pause(_ context.Context, ref string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "pause "+ref)
	if f.paused[ref] {
		return sandbox.Info{}, cerrdefs.ErrConflict
	}
	f.paused[ref] = true
	return sandbox.Info{}, nil
}

func (f *fakePauser) Resume(_ context.Context, ref string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "resume "+ref)
	if !f.paused[ref] {
		return sandbox.Info{}, cerrdefs.ErrConflict
	}
	delete(f.paused, ref)
	return sandbox.Info{}, nil
}

// TestE2BPause: pause freezes the sandbox's container (once: again is
// 409), a paused sandbox lists as paused, answers no envd request and
// does not time out; connect resumes it.
func TestE2BPause(t *testing.T) {
	s, sbx, c, url := newTestServer(t)
	p := &fakePauser{paused: map[string]bool{}}
	s.opts.Pauser, s.opts.ContainerPrefix = p, "pfx-"
	code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", `{"timeout":60}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created sandboxResponse
	_ = json.Unmarshal(body, &created)
	id := created.SandboxID
	if code, body := call(t, "POST", url+"/sandboxes/"+id+"/pause", "alice-key", `{}`); code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", code, body)
	}
	if code, _ := call(t, "POST", url+"/sandboxes/"+id+"/pause", "alice-key", `{}`); code != http.StatusConflict {
		t.Errorf("pause again: %d, want 409", code)
	}
	name := sandbox.ContainerName("pfx-", sandbox.ScopeKey("session", sandbox.Scope{AgentID: "alice", SessionKey: id}))
	if !p.paused[name] {
		t.Fatalf("the container %s was not paused: %v", name, p.calls)
	}
	if code, body := call(t, "GET", url+"/v2/sandboxes?state=paused", "alice-key", ""); code != http.StatusOK || !strings.Contains(string(body), id) {
		t.Errorf("list state=paused: %d %s", code, body)
	}
	if code, body := call(t, "GET", url+"/v2/sandboxes?state=running", "alice-key", ""); code != http.StatusOK || strings.Contains(string(body), id) {
		t.Errorf("list state=running: %d %s", code, body)
	}
	if code, _ := call(t, "POST", url+"/process.Process/List", "", "{}", "E2b-Sandbox-Id", id, "X-Access-Token", created.EnvdAccessToken); code != http.StatusBadGateway {
		t.Errorf("envd of a paused sandbox: %d, want 502", code)
	}
	c.add(time.Hour)
	s.reap(t.Context())
	if sbx.count() != 1 {
		t.Fatal("a paused sandbox timed out")
	}
	if code, body := call(t, "POST", url+"/v2/sandboxes/"+id+"/connect", "alice-key", `{"timeout":30}`); code != http.StatusOK {
		t.Fatalf("connect: %d %s", code, body)
	}
	if p.paused[name] {
		t.Fatalf("connect did not resume: %v", p.calls)
	}
	if code, _ := call(t, "POST", url+"/process.Process/List", "", "{}", "E2b-Sandbox-Id", id, "X-Access-Token", created.EnvdAccessToken); code != http.StatusOK {
		t.Errorf("envd after the resume: %d, want 200", code)
	}
	c.add(31 * time.Second)
	s.reap(t.Context())
	if sbx.count() != 0 {
		t.Fatal("the resumed sandbox did not time out after its new timeout")
	}
}

// TestE2BPolledWatcher: CreateWatcher, GetWatcherEvents and RemoveWatcher
// (the Python SDK's watch): the changes since the last call, for the
// sandbox that made the watcher only.
func TestE2BPolledWatcher(t *testing.T) {
	_, sbx, _, url := newTestServer(t)
	create := func() sandboxResponse {
		code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", `{}`)
		var r sandboxResponse
		if code != http.StatusCreated || json.Unmarshal(body, &r) != nil {
			t.Fatalf("create: %d %s", code, body)
		}
		return r
	}
	a, b := create(), create()
	rpc := func(sb sandboxResponse, method, body string) (int, string) {
		code, out := call(t, "POST", url+"/filesystem.Filesystem/"+method, "", body, "E2b-Sandbox-Id", sb.SandboxID, "X-Access-Token", sb.EnvdAccessToken)
		return code, string(out)
	}
	at := time.Unix(1_800_000_000, 0)
	sbx.setFiles(api.FileInfo{Name: "keep", Path: "/d/keep", Type: "file", Size: 1, ModTime: at},
		api.FileInfo{Name: "gone", Path: "/d/gone", Type: "file", Size: 1, ModTime: at})
	code, out := rpc(a, "CreateWatcher", `{"path":"/d"}`)
	var w createWatcherResponse
	if code != http.StatusOK || json.Unmarshal([]byte(out), &w) != nil || w.WatcherID == "" {
		t.Fatalf("CreateWatcher: %d %s", code, out)
	}
	sbx.setFiles(api.FileInfo{Name: "keep", Path: "/d/keep", Type: "file", Size: 2, ModTime: at},
		api.FileInfo{Name: "new", Path: "/d/new", Type: "file", Size: 1, ModTime: at})
	req := `{"watcherId":"` + w.WatcherID + `"}`
	if code, out := rpc(b, "GetWatcherEvents", req); code != http.StatusNotFound {
		t.Errorf("another sandbox's watcher: %d %s, want 404", code, out)
	}
	code, out = rpc(a, "GetWatcherEvents", req)
	want := `{"events":[{"name":"gone","type":"EVENT_TYPE_REMOVE"},{"name":"keep","type":"EVENT_TYPE_WRITE"},{"name":"new","type":"EVENT_TYPE_CREATE"}]}`
	if code != http.StatusOK || strings.TrimSpace(out) != want {
		t.Errorf("GetWatcherEvents: %d %s, want %s", code, out, want)
	}
	if code, out := rpc(a, "GetWatcherEvents", req); code != http.StatusOK || strings.TrimSpace(out) != `{"events":[]}` {
		t.Errorf("GetWatcherEvents with no change: %d %s", code, out)
	}
	if code, out := rpc(a, "RemoveWatcher", req); code != http.StatusOK {
		t.Errorf("RemoveWatcher: %d %s", code, out)
	}
	if code, _ := rpc(a, "GetWatcherEvents", req); code != http.StatusNotFound {
		t.Errorf("a removed watcher: %d, want 404", code)
	}
}

// TestE2BExplicit: under sandbox.explicit a command makes no sandbox, so
// the E2B create of the default template is the sandbox manager's Create.
func TestE2BExplicit(t *testing.T) {
	_, sbx, _, url := newTestServer(t)
	sbx.explicit = true
	if code, body := call(t, "POST", url+"/v2/sandboxes", "alice-key", `{}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	if sbx.count() != 1 || len(sbx.templates) != 1 || sbx.templates[0] != "" {
		t.Fatalf("want one sandbox made by Create of the default template: %d %v", sbx.count(), sbx.templates)
	}
}
