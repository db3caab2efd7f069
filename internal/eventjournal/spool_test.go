package eventjournal

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestSpoolDrain: events spooled by another process are drained oldest
// first with their time, given a cursor only by the journal, removed once
// published; a file that does not parse is dropped with an error and does
// not stop the others.
func TestSpoolDrain(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i, text := range []string{"first", "second", "third"} {
		if err := Spool(dir, api.Event{Type: "sandbox", Text: text, Cursor: 99, Time: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, SpoolName, "00000000000000000001-bad.json"), []byte("{cut"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var got []Spooled
	n, err := Drain(dir, func(s Spooled) {
		got = append(got, s)
		if _, err := j.Append(s.Event); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || n != 3 || len(got) != 3 {
		t.Fatalf("drain: %d %v %+v, want 3 and an error for the bad file", n, err, got)
	}
	for i, text := range []string{"first", "second", "third"} {
		if got[i].Event.Text != text || got[i].Event.Cursor != 0 || !got[i].Event.Time.Equal(t0.Add(time.Duration(i)*time.Second)) || got[i].UID != os.Getuid() {
			t.Errorf("drained %d: %+v", i, got[i])
		}
	}
	evs, last, _, _ := j.Read(0, 10)
	if len(evs) != 3 || last != 3 || evs[0].Text != "first" || evs[2].Cursor != 3 {
		t.Fatalf("journal: %+v (last %d)", evs, last)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, SpoolName)); len(ents) != 0 {
		t.Fatalf("left in the spool: %v", ents)
	}
	if n, err := Drain(dir, func(Spooled) { t.Fatal("drained twice") }); n != 0 || err != nil {
		t.Fatalf("second drain: %d %v", n, err)
	}
}
