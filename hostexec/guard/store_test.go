package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandboxctl/sandboxctl/vocab"
)

func parseForTest(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).Parse(strings.NewReader(src), "")
}

func newStore(t *testing.T, dir string, now func() time.Time, opts ...StoreOption) *Store {
	t.Helper()
	st, err := OpenStore(filepath.Join(dir, "approvals.json"), append([]StoreOption{WithNow(now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func req(cwd string) PendingRequest {
	return PendingRequest{Command: "git status", Argv: []string{"/bin/sh", "-c", "'/usr/bin/git' 'status'"}, Cwd: cwd, Host: "gateway",
		Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, AgentID: "agent-1", SessionKey: "s1", EnvHash: EnvHash(map[string]string{"A": "1"}),
		ResolvedPaths: []string{"/usr/bin/git"}}
}

func bind(r PendingRequest) Binding {
	return Binding{Command: r.Command, Argv: r.Argv, Cwd: r.Cwd, AgentID: r.AgentID, SessionKey: r.SessionKey, EnvHash: r.EnvHash}
}

func TestStoreFileModeAndFormat(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	st := newStore(t, dir, clock.Now)
	ctx := context.Background()
	if _, err := os.Stat(st.Path()); !os.IsNotExist(err) {
		t.Fatalf("OpenStore created the file: %v", err)
	}
	p, err := st.Request(ctx, req(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.ID) != 36 || p.Slug != p.ID[:8] || p.ExpiresAtMs != clock.Now().Add(120*time.Second).UnixMilli() {
		t.Errorf("pending %+v", p)
	}
	if p.Command != "git status" || p.Host != "gateway" || p.Security != vocab.SecurityAllowlist || p.Ask != vocab.AskOnMiss || p.SessionKey != "s1" || p.AgentID != "agent-1" || len(p.ResolvedPaths) != 1 {
		t.Errorf("fields not kept: %+v", p)
	}
	fi, err := os.Stat(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if err := st.Resolve(ctx, p.Slug, vocab.AllowAlways); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(st.Path())
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["version"] != float64(1) {
		t.Errorf("version %v", doc["version"])
	}
	al := doc["agents"].(map[string]any)["agent-1"].(map[string]any)["allowlist"].([]any)
	e := al[0].(map[string]any)
	for _, k := range []string{"id", "pattern", "lastUsedAt", "lastUsedCommand", "lastResolvedPath"} {
		if _, ok := e[k]; !ok {
			t.Errorf("allowlist entry lacks %s: %v", k, e)
		}
	}
	// no temp files left behind
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if strings.HasSuffix(en.Name(), ".tmp") {
			t.Errorf("temp file left: %s", en.Name())
		}
	}
	// a group/world readable file is tightened on the next write
	if err := os.Chmod(st.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddAllowlist(ctx, "*", "/usr/bin/ls"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(st.Path()); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after rewrite %v", fi.Mode().Perm())
	}
}

func TestStoreCorruptFile(t *testing.T) {
	for name, content := range map[string]string{
		"not json":        "{not json",
		"empty":           "",
		"trailing":        `{"version":1,"defaults":{},"agents":{}} {}`,
		"wrong version":   `{"version":2,"defaults":{},"agents":{}}`,
		"unknown field":   `{"version":1,"defaults":{},"agents":{},"extra":1}`,
		"bad mode":        `{"version":1,"defaults":{"security":"Full"},"agents":{}}`,
		"bad pattern":     `{"version":1,"defaults":{},"agents":{"a":{"allowlist":[{"id":"x","pattern":"*"}]}}}`,
		"null agent":      `{"version":1,"defaults":{},"agents":{"a":null}}`,
		"dup approval":    `{"version":1,"defaults":{},"agents":{},"approvals":[{"id":"a","slug":"a","command":"x","argv":["x"],"cwd":"/","envHash":"","createdAtMs":1,"expiresAtMs":2},{"id":"a","slug":"a","command":"x","argv":["x"],"cwd":"/","envHash":"","createdAtMs":1,"expiresAtMs":2}]}`,
		"bad decision":    `{"version":1,"defaults":{},"agents":{},"approvals":[{"id":"a","slug":"a","command":"x","argv":["x"],"cwd":"/","envHash":"","createdAtMs":1,"expiresAtMs":2,"decision":"yes"}]}`,
		"array toplevel":  `[]`,
		"string toplevel": `"x"`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "approvals.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(path)
			if _, err := OpenStore(path); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenStore: %v, want ErrCorrupt", err)
			}
			// A store opened before the file went bad must not reset it either.
			good := filepath.Join(dir, "good.json")
			st, err := OpenStore(good)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(good, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := st.Request(ctx, req(dir)); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Request on corrupt file: %v", err)
			}
			if err := st.Resolve(ctx, "x", vocab.AllowOnce); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Resolve on corrupt file: %v", err)
			}
			if _, err := st.AddAllowlist(ctx, "a", "/usr/bin/git"); !errors.Is(err, ErrCorrupt) {
				t.Errorf("AddAllowlist on corrupt file: %v", err)
			}
			for _, p := range []string{path, good} {
				got, _ := os.ReadFile(p)
				if string(got) != content {
					t.Errorf("%s was rewritten: %q", p, got)
				}
			}
			after, _ := os.Stat(path)
			if !after.ModTime().Equal(before.ModTime()) {
				t.Error("corrupt file touched")
			}
		})
	}
}

func TestStoreResolveErrors(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st := newStore(t, dir, clock.Now)
	ctx := context.Background()
	if err := st.Resolve(ctx, "no-such-id", vocab.AllowOnce); !errors.Is(err, ErrUnknownApproval) {
		t.Errorf("unknown id: %v", err)
	}
	if err := st.Resolve(ctx, "", vocab.AllowOnce); !errors.Is(err, ErrUnknownApproval) {
		t.Errorf("empty id: %v", err)
	}
	p, _ := st.Request(ctx, req(dir))
	if err := st.Resolve(ctx, p.ID, "allow"); !errors.Is(err, vocab.ErrUnknownMode) {
		t.Errorf("bad decision: %v", err)
	}
	if err := st.Resolve(ctx, p.ID, vocab.DenyOnce); err != nil {
		t.Fatal(err)
	}
	for _, d := range []vocab.ApprovalDecision{vocab.AllowOnce, vocab.AllowAlways, vocab.DenyOnce} {
		if err := st.Resolve(ctx, p.Slug, d); !errors.Is(err, ErrAlreadyDecided) {
			t.Errorf("second decision %s: %v", d, err)
		}
	}
	q, _ := st.Request(ctx, req(dir))
	clock.Add(120 * time.Second)
	if err := st.Resolve(ctx, q.ID, vocab.AllowOnce); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	// the expired request is now a fallback, and nothing was allowlisted
	r, err := st.Check(ctx, q.ID, bind(req(dir)))
	if err != nil || r.Outcome != OutcomeFallback {
		t.Errorf("expired check: %v %v", r.Outcome, err)
	}
	if al, _ := st.Allowlist(ctx, "agent-1"); len(al) != 0 {
		t.Errorf("allowlist after deny/expiry: %v", al)
	}
	// Request validation
	for _, bad := range []PendingRequest{{}, {Command: "x"}, {Command: "x", Argv: []string{"x"}, Cwd: "rel"}, {Command: "x", Argv: []string{"x"}, Cwd: "/", Security: "Full"}, {Command: "x", Argv: []string{"x"}, Cwd: "/", Ask: "x"}} {
		if _, err := st.Request(ctx, bad); err == nil {
			t.Errorf("request %+v accepted", bad)
		}
	}
	if _, err := OpenStore(""); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty path: %v", err)
	}
	if _, err := OpenStore(filepath.Join(dir, "x.json"), WithTimeout(-1)); err == nil {
		t.Error("negative timeout accepted")
	}
}

func TestStoreExpiryFallbackAndCustomTimeout(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st := newStore(t, dir, clock.Now, WithTimeout(10*time.Second))
	ctx := context.Background()
	r := req(dir)
	p, _ := st.Request(ctx, r)
	if p.ExpiresAtMs-p.CreatedAtMs != 10_000 {
		t.Errorf("timeout %d ms", p.ExpiresAtMs-p.CreatedAtMs)
	}
	got, _ := st.Check(ctx, p.ID, bind(r))
	if got.Outcome != OutcomePending {
		t.Errorf("before expiry: %s", got.Outcome)
	}
	clock.Add(9999 * time.Millisecond)
	if got, _ := st.Check(ctx, p.ID, bind(r)); got.Outcome != OutcomePending {
		t.Errorf("just before expiry: %s", got.Outcome)
	}
	clock.Add(time.Millisecond)
	got, err := st.Consume(ctx, p.ID, bind(r))
	if err != nil || got.Outcome != OutcomeFallback {
		t.Fatalf("at expiry: %s %v", got.Outcome, err)
	}
	if _, err := st.Consume(ctx, p.ID, bind(r)); !errors.Is(err, ErrAlreadyConsumed) {
		t.Errorf("second consume: %v", err)
	}
	// askFallback applied by the policy
	h := newHost(t)
	a := Analyze("git status", h.env)
	for fb, want := range map[vocab.Security]vocab.Decision{vocab.SecurityDeny: vocab.DecisionDeny, vocab.SecurityAllowlist: vocab.DecisionDeny, vocab.SecurityFull: vocab.DecisionRun} {
		v := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, AskFallback: fb}.Fallback(a)
		if v.Decision != want {
			t.Errorf("fallback %s: %s", fb, v.Decision)
		}
	}
	// per-request timeout
	r2 := r
	r2.Timeout = time.Second
	p2, _ := st.Request(ctx, r2)
	if p2.ExpiresAtMs-p2.CreatedAtMs != 1000 {
		t.Errorf("per-request timeout %d", p2.ExpiresAtMs-p2.CreatedAtMs)
	}
	// Wait returns once decided
	p3, _ := st.Request(ctx, r)
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = st.Resolve(context.Background(), p3.ID, vocab.AllowOnce)
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if w, err := st.Wait(wctx, p3.ID, bind(r), 5*time.Millisecond); err != nil || w.Outcome != OutcomeAllow {
		t.Errorf("wait: %v %v", w.Outcome, err)
	}
}

func TestStoreBinding(t *testing.T) {
	dir := t.TempDir()
	st := newStore(t, dir, time.Now)
	ctx := context.Background()
	r := req(dir)
	p, _ := st.Request(ctx, r)
	if err := st.Resolve(ctx, p.ID, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	good := bind(r)
	muts := map[string]func(b *Binding){
		"argv":        func(b *Binding) { b.Argv = []string{"/bin/sh", "-c", "'/usr/bin/git' 'push'"} },
		"argv+":       func(b *Binding) { b.Argv = append(append([]string{}, b.Argv...), "x") },
		"command":     func(b *Binding) { b.Command = "git push" },
		"cwd":         func(b *Binding) { b.Cwd = "/" },
		"agent":       func(b *Binding) { b.AgentID = "agent-2" },
		"session key": func(b *Binding) { b.SessionKey = "s2" }, // the same agent in another session
		"env":         func(b *Binding) { b.EnvHash = EnvHash(map[string]string{"A": "2"}) },
	}
	for name, m := range muts {
		b := good
		m(&b)
		if _, err := st.Consume(ctx, p.ID, b); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), strings.TrimSuffix(name, "+")) {
			t.Errorf("%s changed: %v", name, err)
		}
	}
	r1, err := st.Consume(ctx, p.Slug, good)
	if err != nil || r1.Outcome != OutcomeAllow || r1.Decision != vocab.AllowOnce {
		t.Fatalf("good binding: %+v %v", r1, err)
	}
	if _, err := st.Consume(ctx, p.ID, good); !errors.Is(err, ErrAlreadyConsumed) {
		t.Errorf("allow-once reused: %v", err)
	}
	q, _ := st.Request(ctx, r)
	_ = st.Resolve(ctx, q.ID, vocab.DenyOnce)
	if r2, err := st.Consume(ctx, q.ID, good); err != nil || r2.Outcome != OutcomeDeny {
		t.Errorf("denied: %+v %v", r2, err)
	}
	if _, err := st.Check(ctx, "nope", good); !errors.Is(err, ErrUnknownApproval) {
		t.Errorf("unknown: %v", err)
	}
}

func TestStoreConcurrentResolve(t *testing.T) {
	dir := t.TempDir()
	st := newStore(t, dir, time.Now)
	ctx := context.Background()
	const n = 8
	var ids []string
	for i := 0; i < n; i++ {
		r := req(dir)
		r.ResolvedPaths = []string{fmt.Sprintf("/usr/bin/tool%d", i)}
		p, err := st.Request(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	// A second Store on the same file models another process (flock).
	st2 := newStore(t, dir, time.Now)
	var wins, decided atomic.Int32
	var wg sync.WaitGroup
	for _, id := range ids {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(id string, g int) {
				defer wg.Done()
				s := st
				if g%2 == 1 {
					s = st2
				}
				err := s.Resolve(ctx, id, vocab.AllowAlways)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, ErrAlreadyDecided):
					decided.Add(1)
				default:
					t.Errorf("resolve: %v", err)
				}
			}(id, g)
		}
	}
	wg.Wait()
	if wins.Load() != n || decided.Load() != 3*n {
		t.Errorf("wins %d, already-decided %d", wins.Load(), decided.Load())
	}
	al, err := st.Allowlist(ctx, "agent-1")
	if err != nil || len(al) != n {
		t.Errorf("allowlist has %d entries (%v), want %d", len(al), err, n)
	}
}

func TestStoreAllowlistOps(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st := newStore(t, dir, clock.Now)
	ctx := context.Background()
	for _, bad := range []string{"", "*", "/usr/bin/[a]", "rel/x"} {
		if _, err := st.AddAllowlist(ctx, "a", bad); !errors.Is(err, ErrBadPattern) {
			t.Errorf("AddAllowlist(%q): %v", bad, err)
		}
	}
	if _, err := os.Stat(st.Path()); !os.IsNotExist(err) {
		t.Error("a refused pattern wrote the file")
	}
	e1, err := st.AddAllowlist(ctx, "a", "/usr/bin/git")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := st.AddAllowlist(ctx, "a", "/usr/bin/git")
	if again.ID != e1.ID {
		t.Error("duplicate pattern added twice")
	}
	eAll, _ := st.AddAllowlist(ctx, "*", "ls")
	al, _ := st.Allowlist(ctx, "a")
	if len(al) != 2 || al[0].ID != e1.ID || al[1].ID != eAll.ID {
		t.Errorf("allowlist a = %+v", al)
	}
	if other, _ := st.Allowlist(ctx, "b"); len(other) != 1 {
		t.Errorf("agent b sees %v, want only *", other)
	}
	// usage metadata
	h := newHost(t)
	p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: al}
	v := p.Evaluate(Analyze("git status && ls", h.env))
	if v.Decision != vocab.DecisionRun || len(v.Hits) != 2 {
		t.Fatalf("verdict %+v", v)
	}
	clock.Add(time.Minute)
	if err := st.RecordUse(ctx, "a", v.Hits, "git status && ls"); err != nil {
		t.Fatal(err)
	}
	al, _ = st.Allowlist(ctx, "a")
	for _, e := range al {
		if e.LastUsedAt != clock.Now().UnixMilli() || e.LastUsedCommand != "git status && ls" || e.LastResolvedPath == "" {
			t.Errorf("usage not recorded: %+v", e)
		}
	}
	if err := st.RemoveAllowlist(ctx, "a", "nope"); !errors.Is(err, ErrUnknownAllowlist) {
		t.Errorf("remove unknown: %v", err)
	}
	if err := st.RemoveAllowlist(ctx, "a", e1.ID); err != nil {
		t.Fatal(err)
	}
	if al, _ := st.Allowlist(ctx, "a"); len(al) != 1 {
		t.Errorf("after remove: %v", al)
	}
	// defaults
	if err := st.SetDefaults(ctx, Defaults{Security: "x"}); !errors.Is(err, vocab.ErrUnknownMode) {
		t.Errorf("bad defaults: %v", err)
	}
	if err := st.SetDefaults(ctx, Defaults{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, AskFallback: vocab.SecurityDeny}); err != nil {
		t.Fatal(err)
	}
	if d, _ := st.Defaults(ctx); d.Security != vocab.SecurityAllowlist || d.Ask != vocab.AskOnMiss {
		t.Errorf("defaults %+v", d)
	}
	// reopen: persisted
	st2, err := OpenStore(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if al, _ := st2.Allowlist(ctx, "a"); len(al) != 1 {
		t.Errorf("reopened allowlist %v", al)
	}
	// canceled context does nothing
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.AddAllowlist(cctx, "a", "/usr/bin/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: %v", err)
	}
}

func TestStoreListAndSlug(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st := newStore(t, dir, clock.Now)
	ctx := context.Background()
	p1, _ := st.Request(ctx, req(dir))
	clock.Add(time.Second)
	p2, _ := st.Request(ctx, req(dir))
	l, err := st.List(ctx)
	if err != nil || len(l) != 2 || l[0].ID != p2.ID || l[1].ID != p1.ID {
		t.Fatalf("list %v %v", l, err)
	}
	if l[0].Status(clock.Now()) != "pending" {
		t.Errorf("status %s", l[0].Status(clock.Now()))
	}
	// ambiguous slug: hand-craft two requests sharing a slug
	raw, _ := os.ReadFile(st.Path())
	var fsd fileState
	_ = json.Unmarshal(raw, &fsd)
	fsd.Approvals[1].Slug = fsd.Approvals[0].Slug
	data, _ := json.Marshal(fsd)
	_ = os.WriteFile(st.Path(), data, 0o600)
	if err := st.Resolve(ctx, fsd.Approvals[0].Slug, vocab.AllowOnce); !errors.Is(err, ErrAmbiguousSlug) {
		t.Errorf("ambiguous slug: %v", err)
	}
	// old finished requests are pruned on write
	_ = st.Resolve(ctx, p1.ID, vocab.DenyOnce)
	clock.Add(48 * time.Hour)
	_, _ = st.Request(ctx, req(dir))
	l, _ = st.List(ctx)
	if len(l) != 1 {
		t.Errorf("after prune: %d requests", len(l))
	}
}

// TestStoreCancelUnused: a restarted daemon cancels what the previous one
// left unused — pending and decided-but-unused alike; used ones stay. A
// cancelled request refuses a decision, is never used, and keeps the
// sessions that waited on it.
func TestStoreCancelUnused(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st := newStore(t, dir, clock.Now)
	ctx := context.Background()
	pending, _ := st.Request(ctx, req(dir))
	if err := st.AttachSession(ctx, pending.ID, "calm-fox"); err != nil {
		t.Fatal(err)
	}
	other := req(dir)
	other.Command = "git log"
	decided, _ := st.Request(ctx, other)
	if err := st.Resolve(ctx, decided.ID, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	third := req(dir)
	third.Command = "git diff"
	used, _ := st.Request(ctx, third)
	if err := st.Resolve(ctx, used.ID, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Consume(ctx, used.ID, bind(third)); err != nil {
		t.Fatal(err)
	}

	got, err := st.CancelUnused(ctx, "daemon restarted")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]Pending{}
	for _, p := range got {
		ids[p.ID] = p
	}
	if len(got) != 2 || ids[pending.ID].ID == "" || ids[decided.ID].ID == "" {
		t.Fatalf("cancelled %v, want the pending and the decided-unused request", got)
	}
	if s := ids[pending.ID].SessionIDs; len(s) != 1 || s[0] != "calm-fox" {
		t.Errorf("sessions of the cancelled request: %v", s)
	}
	if err := st.Resolve(ctx, pending.ID, vocab.AllowOnce); !errors.Is(err, ErrCancelled) {
		t.Errorf("decide a cancelled request: %v, want ErrCancelled", err)
	}
	if _, err := st.Consume(ctx, decided.ID, bind(other)); !errors.Is(err, ErrAlreadyConsumed) {
		t.Errorf("use a cancelled allow-once: %v, want ErrAlreadyConsumed", err)
	}
	list, _ := st.List(ctx)
	for _, p := range list {
		want := "cancelled"
		if p.ID == used.ID {
			want = "allow-once (used)"
		}
		if p.Status(clock.Now()) != want {
			t.Errorf("%s: status %q, want %q", p.Command, p.Status(clock.Now()), want)
		}
	}
	if again, _ := st.CancelUnused(ctx, "again"); len(again) != 0 {
		t.Errorf("a second CancelUnused cancelled %v", again)
	}
}
