package daemon

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestInvalidUTF8Refused replays issue 13 item 7: a command with invalid
// UTF-8 (raw bytes or a lone surrogate escape) used to be decoded to U+FFFD
// and run with HTTP 200. It is refused with 400 and never reaches the tools.
func TestInvalidUTF8Refused(t *testing.T) {
	var calls atomic.Int32
	tools := &fakeTools{execFunc: func(context.Context, api.ExecParams) (api.Result, error) {
		calls.Add(1)
		return api.Result{}, nil
	}}
	r := startServer(t, Options{Tools: tools})
	for _, body := range [][]byte{
		[]byte("{\"command\":\"echo \xff\xfe > /tmp/x\"}"),
		[]byte(`{"command":"echo \udc80"}`),
	} {
		code, msg := postRaw(t, r.srv, "/v1/tools/exec", body)
		if code != 400 || !strings.Contains(msg, "UTF-8") {
			t.Errorf("%q: got %d %q, want 400 naming UTF-8", body, code, msg)
		}
	}
	if code, _ := postRaw(t, r.srv, "/v1/tools/exec", []byte(`{"command":"echo h\u00e9 \ud83d\ude00"}`)); code != 200 {
		t.Errorf("valid escapes refused: %d", code)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("tools called %d times, want once (the valid request only)", n)
	}
}
