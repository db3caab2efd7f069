package main_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSandboxRemovalLogsNoError: removing a sandbox while its commands run
// is a normal event. The daemon's log (JSON, level info) has no warning or
// error line for it, and no line that reads like a failure: before, the
// supervised path logged "supervisor socket: open /proc/N/root: no such
// file or directory" and, once per output stream, "reading output: sandbox
// container gone: ... exited with exit code 137 (signal 9)"; the plain
// exec path warned "end what ... left behind: ... cannot exec in a stopped
// state". The sessions still end, and say why.
func TestSandboxRemovalLogsNoError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		viaCLI  bool // `sandboxctl sandbox rm`, another process: the daemon learns it from the Engine
	}{
		{"supervised", nil, false},
		{"supervised-cli", nil, true},
		{"plain", []string{"SANDBOXCTL_SUPERVISOR=off"}, false},
		{"plain-cli", []string{"SANDBOXCTL_SUPERVISOR=off"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, alice, _ := filesEnv(t)
			const token = "removal-log-tool-token-0123456789"
			base, stderr, stop := startJSONLogDaemon(t, e, token, tc.environ)

			// Two commands, one with a child of its own, left running.
			var ids []string
			for _, cmd := range []string{"sleep 300", "sleep 200 & sleep 300"} {
				code, body := callTCP(t, base, token, "POST", "/v1/tools/exec",
					map[string]any{"command": cmd, "host": "sandbox", "agentId": alice, "background": true})
				var res struct {
					Details struct {
						Status    string `json:"status"`
						SessionID string `json:"sessionId"`
					} `json:"details"`
				}
				if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Details.Status != "running" {
					t.Fatalf("exec %q: %d %s", cmd, code, body)
				}
				ids = append(ids, res.Details.SessionID)
			}
			code, body := callTCP(t, base, token, "GET", "/v1/sandboxes?agent="+alice, nil)
			var list []struct {
				Name string `json:"name"`
			}
			if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != 1 {
				t.Fatalf("sandboxes of %s: %d %s", alice, code, body)
			}
			if tc.viaCLI {
				if r := e.run(t, "sandbox", "rm", list[0].Name); r.code != 0 {
					t.Fatalf("sandbox rm %s: %+v", list[0].Name, r)
				}
			} else if code, body := callTCP(t, base, token, "DELETE", "/v1/sandboxes/"+list[0].Name, nil); code != http.StatusOK {
				t.Fatalf("remove %s: %d %s", list[0].Name, code, body)
			}
			// Each session ends, and its status says so.
			for _, id := range ids {
				deadline := time.Now().Add(90 * time.Second)
				for {
					code, body := callTCP(t, base, token, "POST", "/v1/tools/process",
						map[string]any{"action": "poll", "sessionId": id, "agentId": alice})
					var res struct {
						Details struct {
							Status string `json:"status"`
						} `json:"details"`
					}
					if code == http.StatusOK && json.Unmarshal(body, &res) == nil && res.Details.Status != "running" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("session %s still running after its sandbox was removed: %d %s", id, code, body)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			stop()

			sc := bufio.NewScanner(strings.NewReader(stderr.String()))
			sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
			for sc.Scan() {
				var line struct {
					Level string `json:"level"`
					Msg   string `json:"msg"`
				}
				if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
					t.Errorf("a log line is not JSON: %q (%v)", sc.Text(), err)
					continue
				}
				if line.Level == "ERROR" || line.Level == "WARN" {
					t.Errorf("a %s line for a normal removal: %s", line.Level, line.Msg)
					continue
				}
				for _, w := range []string{"exit code", "broke", "no such file", "left behind"} {
					if strings.Contains(line.Msg, w) {
						t.Errorf("an error-looking %s line (%q) for a normal removal: %s", line.Level, w, line.Msg)
					}
				}
			}
		})
	}
}
