package sessions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestRawPTYLeavesDSRToTheTerminal: in raw mode the caller's own terminal
// gets the command's exact bytes, cursor-position queries (ESC[6n)
// included, and answers them itself. The daemon must not answer too: the
// program would read two replies, the daemon's fake "row 1, column 1"
// first. The program here asks once and prints the first reply it reads;
// the test answers as the user's terminal would, after seeing the query.
func TestRawPTYLeavesDSRToTheTerminal(t *testing.T) {
	m := newGatewayManager(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := m.Exec(ctx, api.ExecParams{
		Command:    `stty -icanon -echo; printf 'asking\033[6n'; r=$(dd bs=6 count=1 2>/dev/null | od -An -tx1); stty icanon echo; echo "reply:$r"`,
		PTY:        true,
		Raw:        true,
		Background: true,
		AgentID:    "dsr",
	})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	id := r.Details.SessionID
	if id == "" {
		t.Fatalf("no session id: %+v", r)
	}
	var all strings.Builder
	poll := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(all.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("output %q never contained %q", all.String(), want)
			}
			p, err := m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, AgentID: "dsr", TimeoutMs: ptrFloat(2000)})
			if err != nil {
				t.Fatalf("poll: %v", err)
			}
			all.WriteString(p.Content[0].Text)
		}
		return all.String()
	}
	poll("asking")
	// The user's terminal answers: the cursor is at row 5, column 7.
	if _, err := m.Process(ctx, api.ProcessParams{Action: "write", SessionID: id, AgentID: "dsr", Data: "\x1b[5;7R"}); err != nil {
		t.Fatalf("write: %v", err)
	}
	out := poll("Process exited")
	_, reply, _ := strings.Cut(out, "reply:")
	reply = strings.Join(strings.Fields(reply), " ")
	if !strings.HasPrefix(reply, "1b 5b 35 3b 37 52") {
		t.Fatalf("the program read %q as its DSR reply, want the terminal's 1b 5b 35 3b 37 52 (ESC[5;7R) and no answer from the daemon", reply)
	}
}
