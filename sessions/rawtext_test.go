package sessions

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestRawSessionTextIsItsLatestOutput: a raw session makes its sanitised
// text lazily, yet a poll sees output of a command that still runs, and
// after a flood of binary output the text is its latest part, with the
// rest counted as dropped and every byte counted as read.
func TestRawSessionTextIsItsLatestOutput(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := newFakeProc(false)
	hosts["sandbox"].startFunc = func(context.Context, StartSpec) (Process, error) { return p, nil }
	ctx := context.Background()
	r, err := m.Exec(ctx, api.ExecParams{Command: "flood", Background: true, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Details.SessionID
	p.say("hello\n")
	deadline := time.Now().Add(30 * time.Second)
	for {
		pr, err := m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: ptr(1000.0)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text(pr), "hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poll of a running raw session never showed its output: %q", text(pr))
		}
	}
	flood := make([]byte, 3<<20) // under the raw window: no reader needed
	_, _ = rand.Read(flood)
	for b := flood; len(b) > 0; b = b[min(len(b), 64<<10):] {
		_, _ = p.outW.Write(b[:min(len(b), 64<<10)])
	}
	p.say("THE END\n")
	p.exit(0, "")
	waitDone(t, m, id)
	s := m.lookup(id, scopeKey("", ""))
	s.mu.Lock()
	read, aggLen, dropped := s.readRaw, s.agg.Len(), s.agg.Dropped()
	s.mu.Unlock()
	if want := int64(len("hello\n") + len(flood) + len("THE END\n")); read != want {
		t.Errorf("read %d raw bytes, want %d", read, want)
	}
	if aggLen > m.Limits().MaxOutputChars || dropped <= 0 {
		t.Errorf("text: %d chars held, %d dropped", aggLen, dropped)
	}
	lr, err := m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text(lr), "THE END\n") || !strings.HasPrefix(text(lr), "[... ") || strings.ContainsRune(text(lr), 0) {
		t.Errorf("poll does not end with the latest output (or is not sanitised): %.80q ... %q", text(lr), text(lr)[max(0, len(text(lr))-40):])
	}
}
