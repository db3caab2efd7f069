package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/audit/policy"
)

func openTest(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func writeN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := range n {
		if err := l.Record(context.Background(), Record{Kind: KindExecRequest, AgentID: "a",
			Exec: &Exec{Command: fmt.Sprintf("echo %d", i), EnvNames: []string{"FOO"}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func seg1(dir string) string { return filepath.Join(dir, SegmentName(1)) }

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(data, []byte("\n"))
}

func writeLines(t *testing.T, path string, ls [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(ls, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustVerify(t *testing.T, dir string) Report {
	t.Helper()
	rep, err := Verify(dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestVerifyFindsTampering writes a log, checks that it verifies, then
// edits, removes, swaps and cuts lines of copies of it: Verify names the
// first bad line each time.
func TestVerifyFindsTampering(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	writeN(t, l, 6)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir)
	if rep.Problem != nil || rep.Records != 6 || rep.FirstSeq != 1 || rep.LastSeq != 6 {
		t.Fatalf("untouched log: %+v", rep)
	}
	orig := lines(t, seg1(dir))
	if len(orig) != 7 || len(orig[6]) != 0 {
		t.Fatalf("want 6 lines, got %q", orig)
	}
	cases := []struct {
		name     string
		change   func(ls [][]byte) [][]byte
		wantLine int
		wantErr  string
	}{
		{"edit", func(ls [][]byte) [][]byte {
			ls[2] = bytes.Replace(ls[2], []byte("echo 2"), []byte("echo X"), 1)
			return ls
		}, 3, "does not match its hash"},
		{"edit with a recomputed hash", func(ls [][]byte) [][]byte {
			var r Record
			if err := jsonUnmarshal(ls[2][:len(ls[2])-1], &r); err != nil {
				t.Fatal(err)
			}
			r.Exec.Command = "echo X"
			line, _, err := seal(r)
			if err != nil {
				t.Fatal(err)
			}
			ls[2] = line
			return ls
		}, 4, "not the hash of the record before"},
		{"deletion", func(ls [][]byte) [][]byte { return append(ls[:3], ls[4:]...) }, 4, "not the hash of the record before"},
		{"swap", func(ls [][]byte) [][]byte { ls[1], ls[2] = ls[2], ls[1]; return ls }, 2, "not the hash of the record before"},
		{"truncated last line", func(ls [][]byte) [][]byte { ls[5] = ls[5][:len(ls[5])/2]; return ls }, 6, "cut"},
		{"last line without its newline", func(ls [][]byte) [][]byte { ls[5] = ls[5][:len(ls[5])-1]; return ls }, 6, "cut"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ls := make([][]byte, len(orig))
			for i := range orig {
				ls[i] = bytes.Clone(orig[i])
			}
			writeLines(t, seg1(dir), c.change(ls))
			defer writeLines(t, seg1(dir), orig)
			rep := mustVerify(t, dir)
			if rep.Problem == nil {
				t.Fatalf("%s not found: %+v", c.name, rep)
			}
			if rep.Problem.Segment != SegmentName(1) || rep.Problem.Line != c.wantLine || !strings.Contains(rep.Problem.Err.Error(), c.wantErr) {
				t.Fatalf("%s: got %v, want line %d (%s)", c.name, rep.Problem, c.wantLine, c.wantErr)
			}
		})
	}
	if rep := mustVerify(t, dir); rep.Problem != nil {
		t.Fatalf("restored log: %v", rep.Problem)
	}
}

// TestRotationKeepsTheChain: small segments rotate, the chain runs across
// them, a restart goes on from the last record, maxBytes removes the
// oldest segments and verify anchors the chain at the first one held; a
// missing middle segment is found.
func TestRotationKeepsTheChain(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxSegmentBytes: 1024, MaxBytes: 1 << 20}
	l := openTest(t, dir, opts)
	writeN(t, l, 20)
	_ = l.Close()
	l = openTest(t, dir, opts) // a restart goes on with the chain
	writeN(t, l, 20)
	_ = l.Close()
	rep := mustVerify(t, dir)
	if rep.Problem != nil || rep.Records != 40 || rep.Segments < 4 || rep.Anchor != "" {
		t.Fatalf("rotated log: %+v", rep)
	}
	// The first record of segment 2 names segment 1's last hash.
	ls1, ls2 := lines(t, seg1(dir)), lines(t, filepath.Join(dir, SegmentName(2)))
	last, err := unseal(bytes.TrimSuffix(ls1[len(ls1)-2], []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	var first Record
	if err := jsonUnmarshal(ls2[0], &first); err != nil || first.Prev != last {
		t.Fatalf("segment 2 starts with prev %q, segment 1 ends with %q (%v)", first.Prev, last, err)
	}

	// Removing a middle segment is found.
	mid := filepath.Join(dir, SegmentName(2))
	data, _ := os.ReadFile(mid)
	_ = os.Remove(mid)
	if rep := mustVerify(t, dir); rep.Problem == nil || !strings.Contains(rep.Problem.Err.Error(), "missing") {
		t.Fatalf("removed segment not found: %+v", rep)
	}
	_ = os.WriteFile(mid, data, 0o600)

	// Bounded: past maxBytes the oldest segments go, and verify anchors.
	opts.MaxBytes = 3000
	l = openTest(t, dir, opts)
	writeN(t, l, 40)
	_ = l.Close()
	var total int64
	segs, _ := segments(dir)
	for _, s := range segs {
		total += s.size
	}
	if total > opts.MaxBytes+opts.MaxSegmentBytes || segs[0].num == 1 {
		t.Fatalf("segments %v hold %d bytes, want at most about %d and the oldest removed", segs, total, opts.MaxBytes)
	}
	rep = mustVerify(t, dir)
	if rep.Problem != nil || rep.Anchor == "" || rep.LastSeq != 80 {
		t.Fatalf("pruned log: %+v", rep)
	}
}

// TestOpenCutsAPartialLastLine: a line cut by a crash is removed at Open,
// which says so, and the chain goes on from the record before it.
func TestOpenCutsAPartialLastLine(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	writeN(t, l, 3)
	_ = l.Close()
	ls := lines(t, seg1(dir))
	ls[2] = ls[2][:20]
	writeLines(t, seg1(dir), ls)
	if rep := mustVerify(t, dir); rep.Problem == nil || rep.Problem.Line != 3 {
		t.Fatalf("cut line: %+v", rep)
	}
	l = openTest(t, dir, Options{})
	if !strings.Contains(l.Notice(), "cut") {
		t.Fatalf("notice %q", l.Notice())
	}
	writeN(t, l, 2)
	_ = l.Close()
	if rep := mustVerify(t, dir); rep.Problem != nil || rep.Records != 4 || rep.LastSeq != 4 {
		t.Fatalf("after repair: %+v", rep)
	}
}

// faultFile fails writes after a number of bytes, as a full disk does.
type faultFile struct {
	*os.File
	room *int64
}

func (f faultFile) Write(p []byte) (int, error) {
	if int64(len(p)) > *f.room {
		n, _ := f.File.Write(p[:*f.room])
		*f.room = 0
		return n, syscall.ENOSPC
	}
	*f.room -= int64(len(p))
	return f.File.Write(p)
}

func faultOpen(room *int64) func(string) (segmentFile, error) {
	return func(path string) (segmentFile, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		return faultFile{f, room}, nil
	}
}

// TestWriteFailureModes: a full disk makes Record fail with
// ErrUnavailable under refuse, and only count under alert; a partial line
// never stays; once there is room again records go on in one chain.
func TestWriteFailureModes(t *testing.T) {
	for _, mode := range []policy.FailureMode{policy.Refuse, policy.Alert} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			room := int64(1 << 20)
			var logged []string
			l := openTest(t, dir, Options{OnFailure: mode, openFile: faultOpen(&room),
				Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
			writeN(t, l, 2)
			room = 30 // the disk fills up
			err := l.Record(context.Background(), Record{Kind: KindExecRequest, Exec: &Exec{Command: "true"}})
			switch mode {
			case policy.Refuse:
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("refuse: got %v", err)
				}
				if l.Check() == nil {
					t.Fatal("refuse: Check passes on a failing log")
				}
			case policy.Alert:
				if err != nil {
					t.Fatalf("alert: got %v", err)
				}
				if l.Check() != nil {
					t.Fatal("alert: Check refuses")
				}
			}
			if l.Healthy() || l.Failures() != 1 || len(logged) == 0 || !strings.Contains(logged[0], "ERROR") {
				t.Fatalf("healthy %v failures %d logged %q", l.Healthy(), l.Failures(), logged)
			}
			if rep := mustVerify(t, dir); rep.Problem != nil || rep.Records != 2 {
				t.Fatalf("after a failed write: %+v", rep)
			}
			room = 1 << 20
			writeN(t, l, 1)
			if !l.Healthy() || l.Check() != nil {
				t.Fatal("not healthy after a good write")
			}
			_ = l.Close()
			if rep := mustVerify(t, dir); rep.Problem != nil || rep.Records != 3 || rep.LastSeq != 3 {
				t.Fatalf("after recovery: %+v", rep)
			}
		})
	}
}

// TestSignedSegments: closed segments are signed with the operator's key;
// verify with the public key accepts them and refuses a signature that
// does not match (a record appended after signing, another key).
func TestSignedSegments(t *testing.T) {
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := openTest(t, dir, Options{MaxSegmentBytes: 1024, SigningKey: priv})
	writeN(t, l, 12)
	_ = l.Close()
	rep, err := Verify(dir, pub, true)
	if err != nil || rep.Problem != nil || rep.Signed != rep.Segments || rep.Segments < 2 {
		t.Fatalf("signed log: %+v %v", rep, err)
	}
	other, _, _ := ed25519.GenerateKey(nil)
	if rep, _ := Verify(dir, other, true); rep.Problem == nil || !strings.Contains(rep.Problem.Err.Error(), "does not verify") {
		t.Fatalf("another key: %+v", rep)
	}
	// A segment cut after its last record was signed.
	ls := lines(t, seg1(dir))
	writeLines(t, seg1(dir), ls[:len(ls)-2])
	if rep, _ := Verify(dir, pub, true); rep.Problem == nil || rep.Problem.Segment != SegmentName(1) {
		t.Fatalf("cut signed segment: %+v", rep)
	}
}

func TestScanFilters(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := openTest(t, dir, Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	_ = l.Record(ctx, Record{Kind: KindExecRequest, AgentID: "a", Exec: &Exec{Command: "x"}})
	now = now.Add(time.Hour)
	_ = l.Record(ctx, Record{Kind: KindSessionExit, AgentID: "b", Session: &Session{Status: "completed"}})
	_ = l.Record(ctx, Record{Kind: KindExecRequest, AgentID: "b", Exec: &Exec{Command: "y"}})
	collect := func(f Filter) (out []int64) {
		if err := Scan(dir, f, func(r Record) bool { out = append(out, r.Seq); return true }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := collect(Filter{AgentID: "b"}); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("agent b: %v", got)
	}
	if got := collect(Filter{Kinds: []Kind{KindExecRequest}, Since: now}); fmt.Sprint(got) != "[3]" {
		t.Fatalf("exec since: %v", got)
	}
	if got := collect(Filter{Until: now}); fmt.Sprint(got) != "[1]" {
		t.Fatalf("until: %v", got)
	}
	if _, err := ParseFilter(map[string][]string{"kind": {"nope"}}, now); err == nil {
		t.Fatal("bad kind accepted")
	}
}
