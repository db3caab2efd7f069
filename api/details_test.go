package api_test

import (
	"encoding/json"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestDetailsExit: how a command ended, read from the details a client
// decodes (the reasons are the texts the sessions write, api.*Reason).
func TestDetailsExit(t *testing.T) {
	checkExits(t, api.Details.Exit, []exitCase{
		{"exited", `{"status":"completed","exitCode":3}`, api.Exit{Reason: api.ExitExited, Code: 3}, true},
		{"signaled", `{"status":"failed","exitCode":null,"signal":"SIGTERM","reason":"` + api.SignalReason("SIGTERM") + `"}`, api.Exit{Reason: api.ExitSignaled, Signal: "SIGTERM"}, true},
		{"timeout", `{"status":"failed","exitCode":null,"signal":"SIGKILL","reason":"` + api.TimeoutReason("5s") + `"}`, api.Exit{Reason: api.ExitTimeout, Signal: "SIGKILL"}, true},
		{"killed", `{"status":"failed","exitCode":null,"signal":"SIGKILL","reason":"` + api.KillReasonKilled + `"}`, api.Exit{Reason: api.ExitKilled, Signal: "SIGKILL"}, true},
		{"removed", `{"status":"failed","exitCode":null,"signal":"SIGKILL","reason":"` + api.KillReasonRemoved + `"}`, api.Exit{Reason: api.ExitKilled, Signal: "SIGKILL"}, true},
		{"lost", `{"status":"failed","exitCode":null,"signal":"","reason":"the sandbox was removed"}`, api.Exit{Reason: api.ExitLost}, true},
		{"denied", `{"status":"denied","reason":"security is deny"}`, api.Exit{Reason: api.ExitDenied}, true},
		{"approval-pending", `{"status":"approval-pending","approvalId":"a"}`, api.Exit{Reason: api.ExitApprovalPending}, true},
		{"running", `{"status":"running","sessionId":"s"}`, api.Exit{}, false},
		{"not found", `{"status":"failed","error":"not_found","sessionId":"s"}`, api.Exit{}, false},
		{"process list", `{"status":"completed","sessions":[]}`, api.Exit{}, false},
	})
	var d api.Details
	if err := json.Unmarshal([]byte(`{"exitCode":1.5}`), &d); err == nil {
		t.Error("exitCode 1.5 decoded without an error")
	}
}

// TestStreamFrameExit: an exit frame is read as the details of the same
// end are (the fields they share mean the same); another frame has none.
func TestStreamFrameExit(t *testing.T) {
	checkExits(t, api.StreamFrame.Exit, []exitCase{
		{"exited", `{"type":"exit","status":"completed","exitCode":3}`, api.Exit{Reason: api.ExitExited, Code: 3}, true},
		{"exited 0", `{"type":"exit","status":"completed","exitCode":0}`, api.Exit{Reason: api.ExitExited}, true},
		{"no code", `{"type":"exit","status":"completed"}`, api.Exit{}, false},
		{"timeout", `{"type":"exit","status":"failed","signal":"SIGKILL","reason":"` + api.TimeoutReason("5s") + `"}`, api.Exit{Reason: api.ExitTimeout, Signal: "SIGKILL"}, true},
		{"killed", `{"type":"exit","status":"failed","signal":"SIGKILL","reason":"` + api.KillReasonClosed + `"}`, api.Exit{Reason: api.ExitKilled, Signal: "SIGKILL"}, true},
		{"signaled", `{"type":"exit","status":"failed","signal":"SIGTERM","reason":"` + api.SignalReason("SIGTERM") + `"}`, api.Exit{Reason: api.ExitSignaled, Signal: "SIGTERM"}, true},
		{"lost", `{"type":"exit","status":"failed","reason":"the sandbox was removed"}`, api.Exit{Reason: api.ExitLost}, true},
		{"a reason that only starts like a timeout", `{"type":"exit","status":"failed","reason":"timeouts file missing"}`, api.Exit{Reason: api.ExitLost}, true},
		{"start frame", `{"type":"start","sessionId":"s","pid":3}`, api.Exit{}, false},
		{"result frame", `{"type":"result","result":{"details":{"status":"completed","exitCode":0}}}`, api.Exit{}, false},
	})
}

// exitCase is a JSON document and how the command it tells of ended.
type exitCase struct {
	name string
	json string
	want api.Exit
	ok   bool
}

// checkExits decodes each case into a T, as a client does, and compares
// what exit reads from it.
func checkExits[T any](t *testing.T, exit func(T) (api.Exit, bool), cases []exitCase) {
	t.Helper()
	for _, tc := range cases {
		var v T
		if err := json.Unmarshal([]byte(tc.json), &v); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, ok := exit(v)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Exit() = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
