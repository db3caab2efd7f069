package main_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/internal/audit"
)

// auditRecords reads every record of the env's audit log (sandboxctl
// audit --json, the CLI's own query).
func auditRecords(t *testing.T, e *env, args ...string) []audit.Record {
	t.Helper()
	r := e.run(t, append([]string{"--json", "audit"}, args...)...)
	if r.code != 0 {
		t.Fatalf("audit: %+v", r)
	}
	var out []audit.Record
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var rec audit.Record
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("audit --json: %v in %s", err, r.stdout)
		}
		out = append(out, rec)
	}
	return out
}

// byKind returns the records of kind k (of session sid when not "").
func byKind(recs []audit.Record, k audit.Kind, sid string) []audit.Record {
	var out []audit.Record
	for _, r := range recs {
		if r.Kind == k && (sid == "" || r.SessionID == sid) {
			out = append(out, r)
		}
	}
	return out
}

func auditSegment(e *env) string { return filepath.Join(e.state, "audit", audit.SegmentName(1)) }

// TestAuditTrailGateway drives a real daemon through a command that waits
// for a human, its approval on the socket, a refused request and a plain
// run, then stops it: every step is one record with who and what (env
// names, never values), `audit verify` passes, and after an edit of the
// real log it fails naming the edited line.
func TestAuditTrailGateway(t *testing.T) {
	keyPath, pubPath := auditKeyPair(t)
	e := guardEnv(t, "audit:\n  signingKey: "+keyPath+"\n")
	dir := t.TempDir()
	marker := filepath.Join(dir, "RAN")
	d := execJSON(t, e, "--workdir", dir, "--agent", "aud", "--env", "AUDIT_SECRET=hunter2-value", "--", "touch", marker)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	sid := d.SessionID
	if r := e.run(t, "approvals", "resolve", id, "allow-once"); r.code != 0 {
		t.Fatalf("resolve: %+v", r)
	}
	pollUntilDone(t, e, sid, "--agent", "aud")
	if r := e.run(t, "exec", "--agent", "aud", "--host", "elsewhere", "--", "true"); r.code == 0 {
		t.Fatalf("a bad host ran: %+v", r)
	}
	// A safe bin runs without approval.
	if r := e.run(t, "exec", "--agent", "aud", "--", "wc", "-c"); r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Fatalf("wc -c: %+v", r)
	}
	e.stopDaemon(t)

	recs := auditRecords(t, e)
	want := func(k audit.Kind, sid string) audit.Record {
		t.Helper()
		got := byKind(recs, k, sid)
		if len(got) == 0 {
			t.Fatalf("no %s record (session %q) in %+v", k, sid, recs)
		}
		return got[0]
	}
	req := want(audit.KindExecRequest, "")
	if req.Exec == nil || !strings.Contains(req.Exec.Command, marker) || req.AgentID != "aud" ||
		fmt.Sprint(req.Exec.EnvNames) != "[AUDIT_SECRET]" || req.Actor.Via != "socket" || req.Actor.UID == nil || *req.Actor.UID != os.Getuid() || req.RequestID == "" {
		t.Fatalf("exec.request: %+v %+v", req, req.Exec)
	}
	g := want(audit.KindGuardDecision, "")
	if g.Guard.Decision != "approval-pending" || g.Guard.Rule == "" || g.RequestID != req.RequestID {
		t.Fatalf("guard.decision: %+v %+v", g, g.Guard)
	}
	if a := want(audit.KindApprovalRequest, ""); a.Approval.ID != id || a.RequestID != req.RequestID {
		t.Fatalf("approval.request: %+v", a.Approval)
	}
	if a := want(audit.KindApprovalDecide, ""); a.Approval.ID != id || a.Approval.Decision != "allow-once" || a.Actor.Via != "socket" || a.Actor.UID == nil {
		t.Fatalf("approval.decision: %+v %+v", a, a.Approval)
	}
	if a := want(audit.KindApprovalOutcome, sid); a.Approval.Decision != "run" {
		t.Fatalf("approval.outcome: %+v", a.Approval)
	}
	if s := want(audit.KindSessionStart, sid); s.Session.PID == 0 || s.RequestID != req.RequestID || s.Host != "gateway" {
		t.Fatalf("session.start: %+v %+v", s, s.Session)
	}
	if s := want(audit.KindSessionExit, sid); s.Session.Status != "completed" || s.Session.ExitCode == nil || *s.Session.ExitCode != 0 {
		t.Fatalf("session.exit: %+v", s.Session)
	}
	if r := want(audit.KindExecRefused, ""); !strings.Contains(r.Exec.Error, "elsewhere") {
		t.Fatalf("exec.refused: %+v", r.Exec)
	}
	var wc *audit.Record
	for _, q := range byKind(recs, audit.KindExecRequest, "") {
		for _, r := range byKind(recs, audit.KindSessionStart, "") {
			if q.Exec.Command == "wc -c" && r.RequestID == q.RequestID && strings.Contains(r.Session.Command, "wc") {
				wc = &r
			}
		}
	}
	if wc == nil {
		t.Fatalf("no session.start of wc -c in %+v", recs)
	}
	if g := byKind(recs, audit.KindGuardDecision, ""); len(g) != 2 || g[1].Guard.Decision != "run" || g[1].Guard.Rule == "" {
		t.Fatalf("the safe bin's guard.decision: %+v", g)
	}
	if x := byKind(recs, audit.KindSessionExit, wc.SessionID); len(x) != 1 || x[0].Session.OutputBytes != 2 || *x[0].Session.ExitCode != 0 {
		t.Fatalf("wc -c's session.exit: %+v", x)
	}
	if ds := want(audit.KindDaemonStart, ""); len(ds.Daemon.ConfigSHA256) != 64 || ds.Daemon.PID == 0 {
		t.Fatalf("daemon.start: %+v", ds.Daemon)
	}
	want(audit.KindDaemonStop, "")
	// Filters.
	if got := auditRecords(t, e, "--kind", "session.exit", "--agent", "aud"); len(got) != 2 {
		t.Fatalf("--kind session.exit --agent aud: %d records", len(got))
	}
	if got := auditRecords(t, e, "--since", time.Now().Add(time.Minute).Format(time.RFC3339)); len(got) != 0 {
		t.Fatalf("--since the future: %d records", len(got))
	}

	data, err := os.ReadFile(auditSegment(e))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("hunter2-value")) {
		t.Fatal("the audit log holds an environment value")
	}
	if r := e.run(t, "audit", "verify"); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Fatalf("verify of the untouched log: %+v", r)
	}
	// The daemon signed its segment's last hash when it stopped.
	if r := e.run(t, "audit", "verify", "--public-key", pubPath, "--require-signed"); r.code != 0 || !strings.Contains(r.stdout, "1 segment signature(s) verified") {
		t.Fatalf("verify with the public key: %+v", r)
	}
	_, otherPub := auditKeyPair(t)
	if r := e.run(t, "audit", "verify", "--public-key", otherPub); r.code != 1 || !strings.Contains(r.stderr, "does not verify") {
		t.Fatalf("verify with another key: %+v", r)
	}
	// Edit the third line of the real log: verify fails there.
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines[2] = bytes.Replace(lines[2], []byte(`"agentId":"aud"`), []byte(`"agentId":"bud"`), 1)
	if err := os.WriteFile(auditSegment(e), bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run(t, "audit", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, audit.SegmentName(1)+" line 3:") {
		t.Fatalf("verify of an edited log: %+v", r)
	}
}

// TestAuditTrailFilesAndAPI: file transfers through the HTTP files API of a
// real daemon and sandbox are recorded with their size and SHA-256, the
// sandbox made for them too; GET /v1/audit answers the tool token and
// refuses an agent token.
func TestAuditTrailFilesAndAPI(t *testing.T) {
	e, alice, _ := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", alice) })
	if code, body := callTCP(t, base, filesToolToken, "POST", "/v1/tools/exec", map[string]any{"command": "true", "agentId": alice}); code != 200 {
		t.Fatalf("exec: %d %s", code, body)
	}
	content := bytes.Repeat([]byte("audit me\n"), 5000)
	sum := sha256.Sum256(content)
	q := "?agent=" + alice + "&path=/workspace/a.txt"
	if code, body := filesCall(t, base, filesToolToken, "PUT", "/v1/files"+q, "application/octet-stream", content); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/files"+q, "", nil); code != 200 || !bytes.Equal(body, content) {
		t.Fatalf("download: %d, %d bytes", code, len(body))
	}
	if code, body := filesCall(t, base, filesAliceToken, "DELETE", "/v1/files"+q, "", nil); code != 200 {
		t.Fatalf("remove: %d %s", code, body)
	}

	if code, body := filesCall(t, base, filesAliceToken, "GET", "/v1/audit", "", nil); code != http.StatusForbidden {
		t.Fatalf("an agent token read the audit log: %d %s", code, body)
	}
	if code, body := filesCall(t, base, filesToolToken, "GET", "/v1/audit?kind=nope", "", nil); code != http.StatusBadRequest {
		t.Fatalf("bad kind: %d %s", code, body)
	}
	code, body := filesCall(t, base, filesToolToken, "GET", "/v1/audit?kind=file.transfer,sandbox&agent="+alice, "", nil)
	if code != 200 {
		t.Fatalf("GET /v1/audit: %d %s", code, body)
	}
	var recs []audit.Record
	dec := json.NewDecoder(bytes.NewReader(body))
	for dec.More() {
		var r audit.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	files := byKind(recs, audit.KindFileTransfer, "")
	if len(files) != 3 {
		t.Fatalf("want 3 file.transfer records, got %+v", recs)
	}
	hexSum := hex.EncodeToString(sum[:])
	in, out, rm := files[0], files[1], files[2]
	if in.File.Direction != "in" || in.File.Bytes != int64(len(content)) || in.File.SHA256 != hexSum || in.File.Path != "/workspace/a.txt" || in.Actor.Token != "tool" {
		t.Fatalf("upload record: %+v %+v", in, in.File)
	}
	if out.File.Direction != "out" || out.File.Bytes != int64(len(content)) || out.File.SHA256 != hexSum || out.File.Format != "raw" {
		t.Fatalf("download record: %+v", out.File)
	}
	if rm.File.Direction != "remove" || rm.Actor.Via != "agent-token" || rm.Actor.Token != alice || rm.File.Error != "" {
		t.Fatalf("remove record: %+v %+v", rm, rm.File)
	}
	if sb := byKind(recs, audit.KindSandbox, ""); len(sb) == 0 || sb[0].Sandbox.Action != "create" || sb[0].Sandbox.Error != "" {
		t.Fatalf("sandbox create record: %+v", sb)
	}
	// The lifecycle API: alice's own token pauses and resumes her sandbox;
	// each is a sandbox record naming her token.
	code, body = filesCall(t, base, filesAliceToken, "GET", "/v1/sandboxes", "", nil)
	var sbxs []struct {
		Name string `json:"name"`
	}
	if code != 200 || json.Unmarshal(body, &sbxs) != nil || len(sbxs) == 0 {
		t.Fatalf("list sandboxes: %d %s", code, body)
	}
	for _, action := range []string{"pause", "resume"} {
		if code, body := filesCall(t, base, filesAliceToken, "POST", "/v1/sandboxes/"+sbxs[0].Name+"/"+action, "", nil); code != 200 {
			t.Fatalf("%s: %d %s", action, code, body)
		}
	}
	code, body = filesCall(t, base, filesToolToken, "GET", "/v1/audit?kind=sandbox&agent="+alice, "", nil)
	if code != 200 || !strings.Contains(string(body), `"action":"paused"`) || !strings.Contains(string(body), `"action":"resumed"`) ||
		!strings.Contains(string(body), `"actor":{"via":"agent-token","token":"`+alice+`"}`) {
		t.Fatalf("sandbox lifecycle records: %d %s", code, body)
	}

	// Input written to a session and its kill are process.action records
	// with the input's size and digest, not its content.
	code, body = filesCall(t, base, filesToolToken, "POST", "/v1/tools/exec", "",
		[]byte(`{"command":"cat","background":true,"agentId":"`+alice+`"}`))
	var bg struct {
		Details struct {
			SessionID string `json:"sessionId"`
		} `json:"details"`
	}
	if code != 200 || json.Unmarshal(body, &bg) != nil || bg.Details.SessionID == "" {
		t.Fatalf("background cat: %d %s", code, body)
	}
	for _, p := range []string{`{"action":"write","data":"typed-secret\n"`, `{"action":"kill"`} {
		if code, body := filesCall(t, base, filesAliceToken, "POST", "/v1/tools/process", "", []byte(p+`,"sessionId":"`+bg.Details.SessionID+`"}`)); code != 200 {
			t.Fatalf("process %s: %d %s", p, code, body)
		}
	}
	code, body = filesCall(t, base, filesToolToken, "GET", "/v1/audit?kind=process.action", "", nil)
	typed := sha256.Sum256([]byte("typed-secret\n"))
	if code != 200 || !strings.Contains(string(body), `"action":"write","bytes":13,"sha256":"`+hex.EncodeToString(typed[:])+`"`) ||
		!strings.Contains(string(body), `"action":"kill","signal":"SIGKILL"`) || strings.Contains(string(body), "typed-secret") {
		t.Fatalf("process.action records: %d %s", code, body)
	}

	// ?last=2: the newest two, oldest first.
	code, body = filesCall(t, base, filesToolToken, "GET", "/v1/audit?last=2&kind=file.transfer&agent="+alice, "", nil)
	if code != 200 || strings.Count(string(body), "\n") != 2 || !strings.Contains(strings.SplitN(string(body), "\n", 2)[0], `"direction":"out"`) ||
		!strings.Contains(strings.SplitN(string(body), "\n", 2)[1], `"direction":"remove"`) {
		t.Fatalf("last=2: %d %s", code, body)
	}
}

// TestAuditFullDisk puts a real daemon's audit log on a small tmpfs and
// fills it: with audit.onFailure refuse a command whose record cannot be
// written is refused (503, the reason) and does not run; with alert it
// runs and the metrics say the log fails. Once there is room again the
// log goes on in one verified chain.
func TestAuditFullDisk(t *testing.T) {
	for _, mode := range []string{"refuse", "alert"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			auditDir := filepath.Join(e.state, "audit")
			if err := os.MkdirAll(auditDir, 0o700); err != nil {
				t.Fatal(err)
			}
			mountTmpfs(t, auditDir, 64<<10)
			cfg := "exec:\n  host: gateway\n  security: full\n  ask: \"off\"\n" + legacyGateway +
				"audit:\n  onFailure: " + mode + "\n  maxSegmentBytes: 1048576\n  maxBytes: 4194304\n"
			if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			const token = "audit-tool-token-0123456789"
			base := serveTCPArgs(t, e, nil, "SANDBOXCTL_TOKEN="+token)
			fillDir(t, auditDir)
			work := t.TempDir()
			failedAt := -1
			for i := range 40 {
				marker := filepath.Join(work, fmt.Sprint(i))
				code, body := callTCP(t, base, token, "POST", "/v1/tools/exec", map[string]any{"command": "touch " + marker})
				if code == http.StatusOK {
					if _, err := os.Stat(marker); err != nil {
						t.Fatalf("attempt %d answered 200 but did not run: %s", i, body)
					}
					continue
				}
				if mode == "alert" {
					t.Fatalf("alert: attempt %d refused: %d %s", i, code, body)
				}
				if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "audit log unavailable") {
					t.Fatalf("refuse: attempt %d: %d %s", i, code, body)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("refuse: attempt %d ran although its record was not written", i)
				}
				failedAt = i
				break
			}
			_, metrics := callTCP(t, base, token, "GET", "/metrics", nil)
			switch mode {
			case "refuse":
				if failedAt < 0 {
					t.Fatal("refuse: the full disk never refused a command")
				}
			case "alert":
				if !bytes.Contains(metrics, []byte("sandboxctl_audit_healthy 0")) || bytes.Contains(metrics, []byte("sandboxctl_audit_write_failures_total 0\n")) {
					t.Fatalf("alert: metrics do not show the failure:\n%s", grepLines(metrics, "sandboxctl_audit"))
				}
			}
			if !bytes.Contains(metrics, []byte("sandboxctl_audit_healthy 0")) {
				t.Fatalf("metrics:\n%s", grepLines(metrics, "sandboxctl_audit"))
			}
			// Room again: commands run and are recorded.
			if err := os.Remove(filepath.Join(auditDir, "filler")); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(work, "after")
			if code, body := callTCP(t, base, token, "POST", "/v1/tools/exec", map[string]any{"command": "touch " + marker}); code != 200 {
				t.Fatalf("after freeing space: %d %s", code, body)
			}
			_, metrics = callTCP(t, base, token, "GET", "/metrics", nil)
			if !bytes.Contains(metrics, []byte("sandboxctl_audit_healthy 1")) {
				t.Fatalf("not healthy after freeing space:\n%s", grepLines(metrics, "sandboxctl_audit"))
			}
			if r := e.run(t, "audit", "verify"); r.code != 0 {
				t.Fatalf("verify after the full disk: %+v", r)
			}
		})
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// mountTmpfs mounts a tmpfs of size bytes on dir until the test ends.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

// fillDir writes dir/filler until the filesystem has no room left.
func fillDir(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return
		}
	}
}

// auditKeyPair writes an ed25519 key pair as openssl writes it (PKCS #8
// and PKIX PEM) and returns the files.
func auditKeyPair(t *testing.T) (string, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyPath, pubPath
}
