package supervisor

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// TestStartSpecWireGolden: Open's spec and a listed session keep their
// wire names (doc.go): a supervisor already running in a container reads
// and writes exactly these bytes.
func TestStartSpecWireGolden(t *testing.T) {
	code := 0
	var b bytes.Buffer
	for _, v := range []any{
		OpenSpec{ID: "run-1", Argv: []string{"/bin/sh", "-c", "top"}, Env: []string{"A=1"}, Dir: "/work", PTY: true, Cols: 120, Rows: 30,
			KeepStdin: true, Meta: map[string]string{"agent": "a"}, Window: 1 << 20, StartBy: 1764300000000},
		OpenSpec{ID: "run-2", Argv: []string{"true"}},
		SessionInfo{ID: "run-1", Argv: []string{"/bin/sh", "-c", "top"}, Dir: "/work", PTY: true, KeepStdin: true, Meta: map[string]string{"agent": "a"},
			PID: 7, StartedAt: 1764300000000, Running: false, Exit: &ExitStatus{Code: code, EndedAt: 1764300001000}, InputWait: true,
			Stdout: 10, Stderr: 2, Dropped: 1, LogCap: 100},
		SessionInfo{ID: "run-2", Argv: []string{"true"}, PID: 8, Running: true},
	} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(data, '\n'))
	}
	path := filepath.Join("testdata", "start-spec.golden")
	if *updateGolden {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("the supervisor's wire changed:\n got %s\nwant %s", b.Bytes(), want)
	}
}
