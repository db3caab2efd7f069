package nodeexec

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/shellword"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// ProtocolVersion is the version of the link protocol carried in hello.
const ProtocolVersion = 1

// Capabilities a node advertises.
const (
	CapSystemRun   = "system.run"
	CapSystemWhich = "system.which"
	CapApprovals   = "system.execApprovals"
	// CapDurableRuns: the node's runs outlive its agent (a host supervisor
	// keeps them), so a run whose link is lost may go on although the
	// agent that started it is gone.
	CapDurableRuns = "system.durableRuns"
)

// Size limits of the link. Every frame is one WebSocket text message holding
// one JSON object; both ends refuse (and close the link on) a larger one.
const (
	// MaxFrameBytes is the read limit of both ends of the link.
	MaxFrameBytes = 1 << 20
	// MaxOutputChunk is the most output bytes one output frame carries (a
	// node splits larger reads).
	MaxOutputChunk = 32 << 10
	// MaxStdinChunk is the most stdin bytes one stdin frame carries.
	MaxStdinChunk = 64 << 10
	// MaxArgvBytes bounds the summed length of argv, and of rawCommand.
	MaxArgvBytes = 256 << 10
	// MaxArgs bounds the number of argv entries.
	MaxArgs = 4096
	// MaxEnvEntries bounds the request environment; MaxEnvValue one value.
	MaxEnvEntries = 512
	MaxEnvValue   = 32 << 10
	// maxIDLen bounds run ids, idempotency keys, request ids, node ids.
	maxIDLen = 128
	// maxNameLen bounds node names, platforms, capability names.
	maxNameLen = 128
	// maxPathLen bounds cwd.
	maxPathLen = 4096
	// maxHelloRuns bounds the runs a hello may list.
	maxHelloRuns = 4096
)

// Frame types. The gateway sends run, stdin, stdinClose, resize, kill,
// approvals.list, approvals.resolve and system.which; the node sends hello,
// started, denied, approval-pending, error, output, exit and reply.
const (
	frameHello          = "hello"
	frameWelcome        = "welcome"
	frameRun            = "run"
	frameStarted        = "started"
	frameDenied         = "denied"
	framePending        = "approval-pending"
	frameError          = "error"
	frameOutput         = "output"
	frameExit           = "exit"
	frameStdin          = "stdin"
	frameStdinClose     = "stdinClose"
	frameResize         = "resize"
	frameKill           = "kill"
	frameApprovalsList  = "approvals.list"
	frameApprovalsSolve = "approvals.resolve"
	frameWhich          = "system.which"
	frameReply          = "reply"
	frameKept           = "kept"
)

// Output stream names.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
)

// frame is one message on the link. Only the fields of its type are set.
type frame struct {
	Type  string `json:"type"`
	RunID string `json:"runId,omitempty"`
	ReqID string `json:"reqId,omitempty"`

	Hello   *Hello       `json:"hello,omitempty"`   // hello
	Run     *RunParams   `json:"run,omitempty"`     // run
	Started *startedInfo `json:"started,omitempty"` // started
	Exit    *exitInfo    `json:"exit,omitempty"`    // exit

	Reason   string    `json:"reason,omitempty"`   // denied, error, welcome refusal
	Approval *Approval `json:"approval,omitempty"` // approval-pending

	Stream string `json:"stream,omitempty"` // output
	Data   []byte `json:"data,omitempty"`   // output, stdin, kept (base64 in JSON)
	// Offset is the stream position of Data's first byte (output): the
	// gateway drops what it already has and so never shows a byte twice.
	Offset int64 `json:"offset,omitempty"`

	// Resume (welcome) says which of the runs the node listed in its
	// hello the gateway keeps, and from where each one's output goes on;
	// the node ends the others.
	Resume []Resume `json:"resume,omitempty"`
	// Kept (kept) are the per-stream positions the kept output in Data
	// ends at, for a run the gateway adopts.
	Kept *keptInfo `json:"kept,omitempty"`

	Cols int `json:"cols,omitempty"` // resize
	Rows int `json:"rows,omitempty"`

	Approvals  []Approval        `json:"approvals,omitempty"`  // reply to approvals.list
	ApprovalID string            `json:"approvalId,omitempty"` // approvals.resolve
	Decision   string            `json:"decision,omitempty"`   // approvals.resolve
	Names      []string          `json:"names,omitempty"`      // system.which
	Paths      map[string]string `json:"paths,omitempty"`      // reply to system.which
	Error      string            `json:"error,omitempty"`      // reply failure
}

// Hello is what a node says about itself when its link comes up.
type Hello struct {
	Protocol int    `json:"protocol"`
	NodeID   string `json:"nodeId"`
	Name     string `json:"name"`
	// Key is the node's own credential (StateDir/node-key, made on first
	// use): the gateway binds the node's id and name to it at the first
	// enrolment and refuses another node that claims them (Registry).
	Key          string          `json:"key,omitempty"`
	Platform     string          `json:"platform"`
	Version      string          `json:"version,omitempty"`
	Capabilities []string        `json:"capabilities"`
	Approvals    ApprovalSummary `json:"approvals"`
	// Workdir is the node's default working directory.
	Workdir string `json:"workdir,omitempty"`
	// Running lists the runs the node still holds from an earlier link:
	// still running, or finished with output or exit not yet delivered.
	Running []RunState `json:"running,omitempty"`
}

// ApprovalSummary is a node's guard configuration and approvals state.
type ApprovalSummary struct {
	Security    vocab.Security `json:"security"`
	Ask         vocab.Ask      `json:"ask"`
	AskFallback vocab.Security `json:"askFallback,omitempty"`
	Pending     int            `json:"pending"`
	Allowlist   int            `json:"allowlist"`
	// Error is set when the node could not read its approvals file.
	Error string `json:"error,omitempty"`
}

// RunState is one run a node reports in its hello. Besides its state it
// carries what the gateway sent when it started the run, so that a
// restarted gateway can adopt it (Owner names the gateway incarnation that
// started it).
type RunState struct {
	RunID   string `json:"runId"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Command string `json:"command,omitempty"`

	Owner       string `json:"owner,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
	AgentID     string `json:"agentId,omitempty"`
	SessionKey  string `json:"sessionKey,omitempty"`
	Dir         string `json:"cwd,omitempty"`
	PTY         bool   `json:"pty,omitempty"`
	KeepStdin   bool   `json:"stdin,omitempty"`
	StartedAtMs int64  `json:"startedAtMs,omitempty"`
}

// Resume is the gateway's answer for one run a node holds: its output
// goes on after Stdout and Stderr bytes (what the gateway already has).
// With Adopt the gateway has none of it (it restarted): the node first
// sends the run's kept output (a kept frame), then what follows it.
type Resume struct {
	RunID  string `json:"runId"`
	Stdout int64  `json:"stdout"`
	Stderr int64  `json:"stderr"`
	Adopt  bool   `json:"adopt,omitempty"`
}

// keptInfo ends a kept frame: the per-stream positions its data ends at
// and how many older bytes the node no longer has.
type keptInfo struct {
	Stdout  int64 `json:"stdout"`
	Stderr  int64 `json:"stderr"`
	Dropped int64 `json:"dropped,omitempty"`
}

// RunParams is system.run: what the gateway asks a node to run.
type RunParams struct {
	// Argv is the program and its arguments. The gateway sends
	// ["/bin/sh", "-c", COMMAND] for a shell command line.
	Argv []string `json:"argv"`
	// RawCommand is the text shown to humans and analysed by the guards. It
	// must describe Argv exactly (see CheckRawCommand); "" = derived.
	RawCommand string `json:"rawCommand,omitempty"`
	// Dir is the working directory (wire name "cwd").
	Dir            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutMs      int64             `json:"timeoutMs,omitempty"`
	AgentID        string            `json:"agentId,omitempty"`
	SessionKey     string            `json:"sessionKey,omitempty"`
	RunID          string            `json:"runId"`
	IdempotencyKey string            `json:"idempotencyKey"`
	// Security and Ask are the gateway's effective modes. The node may only
	// get stricter from them: it uses min(own, Security) and max(own, Ask).
	Security vocab.Security `json:"security,omitempty"`
	Ask      vocab.Ask      `json:"ask,omitempty"`
	// PTY asks for a pseudo-terminal of Cols x Rows (wire name "tty");
	// KeepStdin keeps a stdin pipe open for stdin frames.
	PTY       bool `json:"tty,omitempty"`
	Cols      int  `json:"cols,omitempty"`
	Rows      int  `json:"rows,omitempty"`
	KeepStdin bool `json:"keepStdin,omitempty"`
	// Owner names the gateway incarnation that starts the run (gateway id
	// and epoch) and SessionID its session there: the node keeps both with
	// the run so that a restarted gateway can adopt it.
	Owner     string `json:"owner,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	// Approved and ApprovalDecision are accepted on the wire only so that
	// they can be seen and ignored: a node decides approval itself, from
	// its own approvals.json, and never trusts a peer's claim (OpenClaw
	// #8682). They are cleared before anything looks at the request.
	Approved         *bool  `json:"approved,omitempty"`
	ApprovalDecision string `json:"approvalDecision,omitempty"`
}

// startedInfo answers a run that started (or was already running: a
// retried idempotency key re-attaches to the first run).
type startedInfo struct {
	PID        int      `json:"pid"`
	PTY        bool     `json:"pty"`
	Cwd        string   `json:"cwd"`
	Warnings   []string `json:"warnings,omitempty"`
	Reattached bool     `json:"reattached,omitempty"`
}

// exitInfo ends a run.
type exitInfo struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Approval is an approval request pending (or decided) on a node: the
// request (api.ApprovalRequest) with the node that holds it and the modes
// it was judged under.
type Approval struct {
	api.ApprovalRequest
	NodeID   string         `json:"nodeId"`
	Node     string         `json:"node,omitempty"` // node name, filled in by the gateway
	Security vocab.Security `json:"security,omitempty"`
	Ask      vocab.Ask      `json:"ask,omitempty"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

func validID(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", kind)
	}
	if len(s) > maxIDLen || !idPattern.MatchString(s) {
		return fmt.Errorf("%s %.40q is not a valid id ([A-Za-z0-9._:-], at most %d bytes)", kind, s, maxIDLen)
	}
	return nil
}

func validText(kind, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is %d bytes, more than %d", kind, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", kind)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s contains a NUL byte", kind)
	}
	return nil
}

// validate checks a system.run request's shape and sizes. It does not judge
// whether the command may run: that is the node's guard.
func (p *RunParams) validate() error {
	if err := validID("runId", p.RunID); err != nil {
		return err
	}
	if err := validID("idempotencyKey", p.IdempotencyKey); err != nil {
		return err
	}
	if len(p.Argv) == 0 {
		return errors.New("argv is empty")
	}
	if len(p.Argv) > MaxArgs {
		return fmt.Errorf("argv has %d entries, more than %d", len(p.Argv), MaxArgs)
	}
	total := 0
	for i, a := range p.Argv {
		total += len(a)
		if err := validText(fmt.Sprintf("argv[%d]", i), a, MaxArgvBytes); err != nil {
			return err
		}
	}
	if total > MaxArgvBytes {
		return fmt.Errorf("argv is %d bytes, more than %d", total, MaxArgvBytes)
	}
	if strings.TrimSpace(p.Argv[0]) == "" {
		return errors.New("argv[0] is empty")
	}
	if err := validText("rawCommand", p.RawCommand, MaxArgvBytes); err != nil {
		return err
	}
	if err := validText("cwd", p.Dir, maxPathLen); err != nil {
		return err
	}
	if len(p.Env) > MaxEnvEntries {
		return fmt.Errorf("env has %d entries, more than %d", len(p.Env), MaxEnvEntries)
	}
	for k, v := range p.Env {
		if err := validText("env key", k, maxNameLen*2); err != nil {
			return err
		}
		if err := validText("env "+k, v, MaxEnvValue); err != nil {
			return err
		}
	}
	for _, f := range []struct{ kind, v string }{{"agentId", p.AgentID}, {"sessionKey", p.SessionKey}, {"owner", p.Owner}, {"sessionId", p.SessionID}} {
		if err := validText(f.kind, f.v, 512); err != nil {
			return err
		}
	}
	if p.TimeoutMs < 0 {
		return fmt.Errorf("timeoutMs %d is negative", p.TimeoutMs)
	}
	if p.Cols < 0 || p.Rows < 0 || p.Cols > 0xffff || p.Rows > 0xffff {
		return fmt.Errorf("terminal size %dx%d out of range", p.Cols, p.Rows)
	}
	if p.Security != "" {
		if _, err := vocab.ParseSecurity(string(p.Security)); err != nil {
			return err
		}
	}
	if p.Ask != "" {
		if _, err := vocab.ParseAsk(string(p.Ask)); err != nil {
			return err
		}
	}
	return nil
}

// validate checks a hello's shape and sizes.
func (h *Hello) validate() error {
	if h.Protocol != ProtocolVersion {
		return fmt.Errorf("protocol version %d is not supported (want %d)", h.Protocol, ProtocolVersion)
	}
	if err := validID("nodeId", h.NodeID); err != nil {
		return err
	}
	if strings.TrimSpace(h.Name) == "" {
		return errors.New("node name is empty")
	}
	if b, err := hex.DecodeString(h.Key); err != nil || len(b) != nodeKeyBytes {
		return errors.New("the node sent no valid node credential (key): upgrade its agent")
	}
	for kind, v := range map[string]string{"name": h.Name, "platform": h.Platform, "version": h.Version} {
		if err := validText(kind, v, maxNameLen); err != nil {
			return err
		}
	}
	if err := validText("workdir", h.Workdir, maxPathLen); err != nil {
		return err
	}
	if len(h.Capabilities) > 64 {
		return errors.New("too many capabilities")
	}
	for _, c := range h.Capabilities {
		if err := validText("capability", c, maxNameLen); err != nil {
			return err
		}
	}
	if len(h.Running) > maxHelloRuns {
		return fmt.Errorf("hello lists %d runs, more than %d", len(h.Running), maxHelloRuns)
	}
	seen := make(map[string]bool, len(h.Running))
	for _, r := range h.Running {
		if err := validID("runId", r.RunID); err != nil {
			return err
		}
		if seen[r.RunID] {
			return fmt.Errorf("hello lists run %s twice", r.RunID)
		}
		seen[r.RunID] = true
		for kind, v := range map[string]string{"owner": r.Owner, "sessionId": r.SessionID, "agentId": r.AgentID, "sessionKey": r.SessionKey} {
			if err := validText(kind, v, 512); err != nil {
				return err
			}
		}
		for kind, v := range map[string]string{"command": r.Command, "cwd": r.Dir} {
			if err := validText(kind, v, maxPathLen); err != nil {
				return err
			}
		}
	}
	return nil
}

// shellNames are the shells whose `-c SCRIPT` form a rawCommand may name by
// its script alone.
var shellNames = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true}

// ShellScript returns the script of a shell-wrapper argv — [SHELL, "-c" or
// "-lc", SCRIPT] with SHELL a POSIX shell by name or path — and whether argv
// has that form.
func ShellScript(argv []string) (string, bool) {
	if len(argv) != 3 || (argv[1] != "-c" && argv[1] != "-lc") {
		return "", false
	}
	name := argv[0]
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if !shellNames[name] {
		return "", false
	}
	return argv[2], true
}

// FormatArgv renders argv as one POSIX shell line that splits back into
// exactly argv (shellword.Join: each word quoted by syntax.Quote; words made
// only of safe characters stay bare). A word no POSIX shell line can carry
// (NUL, controls other than newline and tab) is an error wrapping
// shellword.ErrUnquotable. The node describes argv with this one function
// (CheckRawCommand) and runs the line under its own shell, which may be dash:
// hence POSIX quoting, never bash's $'...'.
func FormatArgv(argv []string) (string, error) {
	return shellword.Join(argv)
}

// ErrRawCommandMismatch is the refusal of a rawCommand that does not describe
// the argv it came with (CVE-2026-26325: approve one text, run another).
var ErrRawCommandMismatch = errors.New("rawCommand does not match argv")

// CheckRawCommand verifies that raw describes argv exactly (CVE-2026-26325):
// raw is empty (the node derives it), or argv is a shell wrapper
// [sh -c SCRIPT] and raw equals SCRIPT byte for byte, or raw equals
// FormatArgv(argv). It returns the shell line that runs — always
// FormatArgv(argv), so the process is exactly the argv that was sent and the
// guard judges all of it, the shell in argv[0] included.
//
// An argv FormatArgv cannot render is refused with its error
// (shellword.ErrUnquotable).
func CheckRawCommand(argv []string, raw string) (string, error) {
	line, err := FormatArgv(argv)
	if err != nil {
		return "", err
	}
	if raw == "" || raw == line {
		return line, nil
	}
	if script, ok := ShellScript(argv); ok && raw == script {
		return line, nil
	}
	return "", fmt.Errorf("%w: rawCommand %.80q, argv renders as %.80q", ErrRawCommandMismatch, raw, line)
}

// TokenEqual compares a presented token with the expected one in constant
// time (independent of where they differ and of their lengths: both are
// hashed first). An empty expected token never matches.
func TokenEqual(presented, expected string) bool {
	if expected == "" {
		return false
	}
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256([]byte(expected))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// ErrFingerprintMismatch is returned (wrapped) by a pinned TLS handshake whose
// leaf certificate has another SHA-256 fingerprint.
var ErrFingerprintMismatch = errors.New("TLS certificate fingerprint does not match the pinned one")

// ParseFingerprint parses a SHA-256 certificate fingerprint: 64 hex digits,
// optionally separated by colons, optionally prefixed "sha256:" or
// "SHA256:"; case is ignored.
func ParseFingerprint(s string) ([]byte, error) {
	t := strings.TrimSpace(s)
	if len(t) > 7 && strings.EqualFold(t[:7], "sha256:") {
		t = t[7:]
	}
	t = strings.ReplaceAll(t, ":", "")
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("fingerprint %q is not a SHA-256 hex digest (64 hex digits, colons optional)", s)
	}
	return b, nil
}

// Fingerprint returns the SHA-256 fingerprint of a DER certificate as colon
// separated upper-case hex, the form `openssl x509 -fingerprint -sha256`
// prints.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, c := range sum {
		parts[i] = fmt.Sprintf("%02X", c)
	}
	return strings.Join(parts, ":")
}

// pinnedVerify returns a VerifyConnection callback that accepts only a peer
// whose leaf certificate hashes to want.
func pinnedVerify(want []byte) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: the server sent no certificate", ErrFingerprintMismatch)
		}
		got := sha256.Sum256(cs.PeerCertificates[0].Raw)
		if subtle.ConstantTimeCompare(got[:], want) != 1 {
			return fmt.Errorf("%w: got %s", ErrFingerprintMismatch, Fingerprint(cs.PeerCertificates[0].Raw))
		}
		return nil
	}
}

// ErrInsecureURL is the refusal of a plain ws:// (or http://) gateway URL
// whose host is not a loopback address.
var ErrInsecureURL = errors.New("plain WebSocket is only allowed to a loopback gateway; use wss://")

// checkGatewayURL parses a gateway URL and returns it in ws/wss form with
// the connect path added when the URL has no path. https/wss are TLS;
// http/ws are accepted only for a loopback host.
func checkGatewayURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("gateway URL: %w", err)
	}
	switch u.Scheme {
	case "wss", "https":
		u.Scheme = "wss"
	case "ws", "http":
		if !isLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("gateway URL %s: %w", raw, ErrInsecureURL)
		}
		u.Scheme = "ws"
	default:
		return nil, fmt.Errorf("gateway URL %q: scheme must be wss (or ws on loopback)", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("gateway URL %q has no host", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = ConnectPath
	}
	return u, nil
}

// ConnectPath is the daemon's WebSocket endpoint for nodes.
const ConnectPath = "/v1/nodes/connect"

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
