package runtimecli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestLogfLevels: the JSON log carries each Logf message at the level its
// prefix names, without the prefix; debug lines are not written at the
// default level; an unknown format is refused.
func TestLogfLevels(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogger(&buf, LogFormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	logf := logfTo(l)
	logf("listening on %s", "/s")
	logf("warning: cannot %s", "x")
	logf("debug: supervisor connection closed")
	logf("error: failed %d", 3)
	var got [][2]string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if _, ok := m["time"]; !ok {
			t.Errorf("no time in %q", line)
		}
		got = append(got, [2]string{m["level"].(string), m["msg"].(string)})
	}
	want := [][2]string{{"INFO", "listening on /s"}, {"WARN", "cannot x"}, {"ERROR", "failed 3"}}
	if len(got) != len(want) {
		t.Fatalf("lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := newLogger(&buf, "xml"); err == nil {
		t.Error("--log-format xml accepted")
	}
	buf.Reset()
	l, _ = newLogger(&buf, LogFormatText)
	logfTo(l)("warning: plain")
	if s := buf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "msg=plain") {
		t.Errorf("text line %q", s)
	}
}
