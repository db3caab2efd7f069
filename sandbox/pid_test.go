package sandbox

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPIDInsideTheSandboxOnEveryPath: Process.PID (details.pid of the exec
// tool) is the command's pid inside the sandbox, the one the command sees as
// $$, on the supervisor path and on the plain Engine exec path alike (the
// plain path used to report the host pid).
func TestPIDInsideTheSandboxOnEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plain bool
	}{{"supervisor", false}, {"plain", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManagerOpts(t, func(o *Options) { o.DisableSupervisor = tc.plain })
			st := startCmd(t, m, Scope{AgentID: "pid-" + tc.name}, `echo $$; exec sleep 30`, nil)
			_, supervised := st.Process.(*SupervisedExec)
			if supervised == tc.plain {
				t.Fatalf("started %T, want the %s path", st.Process, tc.name)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_ = st.Kill(ctx)
				_, _, _ = st.Wait(ctx)
			})
			line, err := bufio.NewReader(st.Stdout()).ReadString('\n')
			if err != nil {
				t.Fatalf("reading $$: %v", err)
			}
			inside, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("$$ = %q: %v", line, err)
			}
			if got := st.PID(); got != inside {
				t.Fatalf("PID() = %d, the command's pid inside the sandbox is %d", got, inside)
			}
		})
	}
}
