package supervisor

import (
	"fmt"
	"strings"
	"testing"
)

// TestLogCapKeepsAllThenSaysSo: a session's log keeps all of its output up
// to the configured cap, however small the writes (each costs a record
// header), and once output goes beyond the cap the session's status says
// how much was not kept while the log holds the exact last bytes.
func TestLogCapKeepsAllThenSaysSo(t *testing.T) {
	const logCap = 4096
	e, _ := startServerOpts(t, ServerOptions{Dirs: []string{t.TempDir()}, LogCap: logCap})
	c := newTestClient(t, e)
	info := func(id string) SessionInfo {
		t.Helper()
		list, err := c.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range list {
			if in.ID == id {
				return in
			}
		}
		t.Fatalf("session %s not listed", id)
		return SessionInfo{}
	}

	// Exactly the cap, in 512 writes of 8 bytes.
	p := shell(t, c, `i=0; while [ $i -lt 512 ]; do printf '%07d\n' $i; i=$((i+1)); done`, nil)
	out, _, code, _ := collect(t, p)
	if code != 0 || len(out) != logCap {
		t.Fatalf("printed %d bytes (exit %d), want %d", len(out), code, logCap)
	}
	in := info(p.ID())
	kept, _, _, err := c.Read(ctxT(t), p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if in.Dropped != 0 || string(kept) != out || in.DroppedNote() != "" {
		t.Fatalf("at the cap the log kept %d of %d bytes, dropped %d, note %q; want all of them", len(kept), len(out), in.Dropped, in.DroppedNote())
	}

	// Five times the cap: the last bytes are kept, and the status says
	// what is gone.
	p = shell(t, c, `i=0; while [ $i -lt 2560 ]; do printf '%07d\n' $i; i=$((i+1)); done`, nil)
	out, _, _, _ = collect(t, p)
	in = info(p.ID())
	kept, _, _, err = c.Read(ctxT(t), p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) < logCap || len(kept) > 2*logCap || !strings.HasSuffix(out, string(kept)) {
		t.Fatalf("beyond the cap the log kept %d bytes (a suffix: %v), want the last %d to %d", len(kept), strings.HasSuffix(out, string(kept)), logCap, 2*logCap)
	}
	if in.Dropped != int64(len(out)-len(kept)) || in.LogCap != logCap {
		t.Fatalf("status: dropped %d, log cap %d; want %d and %d", in.Dropped, in.LogCap, len(out)-len(kept), logCap)
	}
	if note := in.DroppedNote(); !strings.Contains(note, "output beyond the last 4096 bytes was not kept") {
		t.Fatalf("note %q", note)
	}
}

// TestOutlogKeepsAllUpToCap: the log itself, written in records as small
// as a command's line-by-line output can make them, keeps every byte up
// to its cap; beyond it, exactly what it no longer has is counted.
func TestOutlogKeepsAllUpToCap(t *testing.T) {
	const logCap = 4096
	l, err := newOutlog(t.TempDir(), logCap)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	var all strings.Builder
	for i := range logCap / 8 {
		line := fmt.Sprintf("%07d\n", i)
		all.WriteString(line)
		if err := l.append(1, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.aggregated()
	if err != nil {
		t.Fatal(err)
	}
	if l.dropped() != 0 || string(got) != all.String() {
		t.Fatalf("at the cap: kept %d of %d bytes, %d dropped", len(got), all.Len(), l.dropped())
	}
	for i := range 3 * logCap / 8 {
		line := fmt.Sprintf("%07d\n", i)
		all.WriteString(line)
		if err := l.append(2, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err = l.aggregated(); err != nil {
		t.Fatal(err)
	}
	if len(got) < logCap || !strings.HasSuffix(all.String(), string(got)) || l.dropped() != int64(all.Len()-len(got)) {
		t.Fatalf("beyond the cap: kept %d bytes (a suffix: %v), %d dropped of %d", len(got), strings.HasSuffix(all.String(), string(got)), l.dropped(), all.Len())
	}
}
