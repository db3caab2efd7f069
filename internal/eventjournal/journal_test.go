package eventjournal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

func appendN(t *testing.T, j *Journal, n int, agent string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := j.Append(api.Event{Type: "exit", AgentID: agent, Text: fmt.Sprintf("event %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCursorsReplayAndRestart(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, j, 5, "a")
	evs, last, gap, _ := j.Read(2, 100)
	if last != 5 || gap != nil || len(evs) != 3 || evs[0].Cursor != 3 || evs[2].Cursor != 5 {
		t.Fatalf("since 2: %d events (%+v), last %d, gap %+v", len(evs), evs, last, gap)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// A restarted daemon holds the same events and goes on numbering.
	j, err = Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ev, err := j.Append(api.Event{Type: "exit"})
	if err != nil || ev.Cursor != 6 {
		t.Fatalf("after restart: cursor %d, %v; want 6", ev.Cursor, err)
	}
	if evs, _, gap, _ := j.Read(4, 100); len(evs) != 2 || gap != nil {
		t.Errorf("since 4 after restart: %+v gap %+v", evs, gap)
	}
}

func TestBoundedWithGap(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	appendN(t, j, 500, "a")
	var disk int64
	for _, name := range []string{CurrentName, OldName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		disk += fi.Size()
	}
	if disk > 2000 {
		t.Errorf("journal uses %d bytes on disk, want at most 2 segments of 1000", disk)
	}
	evs, last, gap, _ := j.Read(10, 1000)
	if gap == nil || gap.Missed == 0 || gap.Oldest != evs[0].Cursor || gap.Missed != gap.Oldest-11 {
		t.Fatalf("since 10 after 500 events: gap %+v, first %d", gap, evs[0].Cursor)
	}
	if evs[len(evs)-1].Cursor != last || last != 500 {
		t.Errorf("last %d, newest held %d", last, evs[len(evs)-1].Cursor)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Cursor != evs[i-1].Cursor+1 {
			t.Fatalf("hole between %d and %d", evs[i-1].Cursor, evs[i].Cursor)
		}
	}
	// A cursor past the newest: the journal was reset under the client.
	if _, _, gap, _ := j.Read(9999, 10); gap == nil || !gap.Reset {
		t.Errorf("since 9999: gap %+v, want a reset", gap)
	}
}

func TestTruncatedLineSkipped(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, j, 2, "a")
	_ = j.Close()
	f, err := os.OpenFile(filepath.Join(dir, CurrentName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"cursor":3,"type":"ex`) // a write cut by a crash
	_ = f.Close()
	j, err = Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs, last, _, _ := j.Read(0, 10)
	if len(evs) != 2 || last != 2 {
		t.Errorf("after a cut line: %d events, last %d", len(evs), last)
	}
	// The next event is a line of its own: it survives another restart.
	appendN(t, j, 1, "b")
	_ = j.Close()
	if j, err = Open(dir, 0); err != nil {
		t.Fatal(err)
	}
	if evs, last, _, _ := j.Read(0, 10); len(evs) != 3 || last != 3 || evs[2].AgentID != "b" {
		t.Errorf("after an append past a cut line and a restart: %+v", evs)
	}
}

func TestChangedWakes(t *testing.T) {
	j, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	_, _, _, changed := j.Read(0, 1)
	appendN(t, j, 1, "a")
	select {
	case <-changed:
	default:
		t.Fatal("changed not closed by an append")
	}
}
