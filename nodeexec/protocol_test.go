package nodeexec

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/internal/shellword"
)

func TestFormatArgvRoundTrips(t *testing.T) {
	cases := [][]string{
		{"echo", "hi"},
		{"/bin/sh", "-c", "echo $HOME; ls *"},
		{"/bin/sh", "-c", "echo a\n\techo 'b'\nls"},
		{"printf", "%s\n", "it's", "", "a b", `"q"`, "$(id)", "`id`", "\\", "ünï"},
	}
	for _, argv := range cases {
		line, err := FormatArgv(argv)
		if err != nil {
			t.Fatalf("FormatArgv(%q): %v", argv, err)
		}
		// Split the rendered line with a real shell and compare.
		got, err := exec.Command("/bin/sh", "-c", `f() { for a in "$@"; do printf '<%s>' "$a"; done; }; f `+line).Output()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		var want strings.Builder
		for _, a := range argv {
			want.WriteString("<" + a + ">")
		}
		if string(got) != want.String() {
			t.Errorf("FormatArgv(%q) = %s splits to %s", argv, line, got)
		}
	}
	if got, err := FormatArgv([]string{"ls", "-la", "/tmp/x_y.z"}); err != nil || got != "ls -la /tmp/x_y.z" {
		t.Errorf("plain words quoted: %s, %v", got, err)
	}
}

// TestFormatArgvRefusesUnquotable: a NUL or a control character has no
// POSIX shell form; the node refuses the run with a clear error.
func TestFormatArgvRefusesUnquotable(t *testing.T) {
	for _, w := range []string{"a\x00b", "bell\a", "cr\r", "\xff", "nbsp\u00a0"} {
		if line, err := FormatArgv([]string{"echo", w}); !errors.Is(err, shellword.ErrUnquotable) {
			t.Errorf("FormatArgv(%q) = %q, %v; want ErrUnquotable", w, line, err)
		}
		if _, err := CheckRawCommand([]string{"echo", w}, ""); !errors.Is(err, shellword.ErrUnquotable) {
			t.Errorf("CheckRawCommand(%q) = %v; want ErrUnquotable", w, err)
		}
	}
}

func TestCheckRawCommand(t *testing.T) {
	sh := []string{"/bin/sh", "-c", "echo hi && id"}
	for _, tc := range []struct {
		argv []string
		raw  string
		ok   bool
	}{
		{sh, "", true},
		{sh, "echo hi && id", true},
		{sh, "/bin/sh -c 'echo hi && id'", true},
		{sh, "echo hi", false},
		{sh, "echo hi && id ", false},
		{sh, " echo hi && id", false},
		{[]string{"bash", "-lc", "x"}, "x", true},
		{[]string{"/tmp/evil", "-c", "x"}, "x", false}, // not a shell: the script alone does not describe it
		{[]string{"/bin/sh", "-c", "x", "extra"}, "x", false},
		{[]string{"ls", "-l", "a b"}, "ls -l 'a b'", true},
		{[]string{"ls", "-l", "a b"}, "ls -l a b", false},
		{[]string{"rm", "-rf", "/"}, "ls", false},
	} {
		line, err := CheckRawCommand(tc.argv, tc.raw)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRawCommand(%q, %q) = %v, want ok=%v", tc.argv, tc.raw, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrRawCommandMismatch) {
			t.Errorf("error %v does not wrap ErrRawCommandMismatch", err)
		}
		if want, _ := FormatArgv(tc.argv); err == nil && line != want {
			t.Errorf("line %q, want the argv rendering", line)
		}
	}
}

func TestTokenEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"secret", "secret", true},
		{"secret", "secreT", false},
		{"secret", "secret2", false},
		{"", "", false},
		{"x", "", false},
		{"", "x", false},
	} {
		if got := TokenEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("TokenEqual(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestFingerprint(t *testing.T) {
	der := []byte("not really a certificate")
	sum := sha256.Sum256(der)
	hexs := hex.EncodeToString(sum[:])
	fp := Fingerprint(der)
	for _, s := range []string{hexs, strings.ToUpper(hexs), fp, "sha256:" + hexs, "SHA256:" + fp, " " + hexs + " "} {
		b, err := ParseFingerprint(s)
		if err != nil || hex.EncodeToString(b) != hexs {
			t.Errorf("ParseFingerprint(%q) = %x, %v", s, b, err)
		}
	}
	for _, s := range []string{"", "abc", hexs[:62], hexs + "00", "zz" + hexs[2:], "md5:" + hexs} {
		if _, err := ParseFingerprint(s); err == nil {
			t.Errorf("ParseFingerprint(%q) accepted", s)
		}
	}
	verify := pinnedVerify(sum[:])
	if err := verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: der}}}); err != nil {
		t.Errorf("matching pin: %v", err)
	}
	if err := verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte("other")}}}); !errors.Is(err, ErrFingerprintMismatch) {
		t.Errorf("other cert: %v", err)
	}
	if err := verify(tls.ConnectionState{}); !errors.Is(err, ErrFingerprintMismatch) {
		t.Errorf("no cert: %v", err)
	}
}

func TestCheckGatewayURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"wss://gw.example:8443", "wss://gw.example:8443" + ConnectPath},
		{"https://gw.example/custom", "wss://gw.example/custom"},
		{"ws://127.0.0.1:9/", "ws://127.0.0.1:9" + ConnectPath},
		{"http://localhost:9", "ws://localhost:9" + ConnectPath},
		{"ws://[::1]:9", "ws://[::1]:9" + ConnectPath},
	} {
		u, err := checkGatewayURL(tc.in)
		if err != nil || u.String() != tc.want {
			t.Errorf("checkGatewayURL(%q) = %v, %v; want %s", tc.in, u, err, tc.want)
		}
	}
	for _, in := range []string{"ws://10.0.0.1:9", "http://gw.example", "ftp://x", "wss://", "ws://127.0.0.1.evil.example"} {
		if _, err := checkGatewayURL(in); err == nil {
			t.Errorf("checkGatewayURL(%q) accepted", in)
		}
	}
	if _, err := checkGatewayURL("ws://192.0.2.1"); !errors.Is(err, ErrInsecureURL) {
		t.Errorf("plain remote: %v", err)
	}
}

func TestRunParamsValidate(t *testing.T) {
	base := func() RunParams {
		return RunParams{Argv: []string{"/bin/sh", "-c", "true"}, RunID: "r1", IdempotencyKey: "k1"}
	}
	if p := base(); p.validate() != nil {
		t.Fatalf("base invalid: %v", p.validate())
	}
	big := strings.Repeat("x", MaxArgvBytes+1)
	manyEnv := map[string]string{}
	for i := range MaxEnvEntries + 1 {
		manyEnv["K"+strings.Repeat("x", i%50)+string(rune('A'+i%26))+hex.EncodeToString([]byte{byte(i), byte(i >> 8)})] = "v"
	}
	for name, mut := range map[string]func(*RunParams){
		"no run id":        func(p *RunParams) { p.RunID = "" },
		"bad run id":       func(p *RunParams) { p.RunID = "a b" },
		"long run id":      func(p *RunParams) { p.RunID = strings.Repeat("a", 200) },
		"no key":           func(p *RunParams) { p.IdempotencyKey = "" },
		"empty argv":       func(p *RunParams) { p.Argv = nil },
		"empty argv0":      func(p *RunParams) { p.Argv = []string{" "} },
		"huge argv":        func(p *RunParams) { p.Argv = []string{"sh", "-c", big} },
		"many args":        func(p *RunParams) { p.Argv = make([]string, MaxArgs+1); p.Argv[0] = "x" },
		"NUL in argv":      func(p *RunParams) { p.Argv = []string{"echo", "a\x00b"} },
		"bad utf8":         func(p *RunParams) { p.Argv = []string{"echo", "\xff"} },
		"huge raw":         func(p *RunParams) { p.RawCommand = big },
		"many env":         func(p *RunParams) { p.Env = manyEnv },
		"huge env value":   func(p *RunParams) { p.Env = map[string]string{"A": strings.Repeat("v", MaxEnvValue+1)} },
		"negative timeout": func(p *RunParams) { p.TimeoutMs = -1 },
		"huge tty":         func(p *RunParams) { p.Cols = 70000 },
		"bad security":     func(p *RunParams) { p.Security = "yolo" },
		"bad ask":          func(p *RunParams) { p.Ask = "never" },
	} {
		p := base()
		mut(&p)
		if err := p.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestApprovedFlagOnTheWire(t *testing.T) {
	// The field exists only to be seen and dropped: decoding keeps it so the
	// node can log it, and nothing in the guard request carries it.
	var f frame
	if err := json.Unmarshal([]byte(`{"type":"run","run":{"argv":["true"],"runId":"r","idempotencyKey":"k","approved":true,"approvalDecision":"allow-always"}}`), &f); err != nil {
		t.Fatal(err)
	}
	if f.Run.Approved == nil || !*f.Run.Approved || f.Run.ApprovalDecision != "allow-always" {
		t.Fatalf("decoded %+v", f.Run)
	}
	var gr GuardRequest
	b, _ := json.Marshal(gr)
	if strings.Contains(strings.ToLower(string(b)), "approv") {
		t.Errorf("GuardRequest carries an approval field: %s", b)
	}
}

func TestHelloValidate(t *testing.T) {
	ok := Hello{Protocol: ProtocolVersion, NodeID: "abc", Name: "n", Platform: "linux/amd64", Key: testNodeKey("abc")}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]Hello{
		"protocol": {Protocol: 99, NodeID: "abc", Name: "n"},
		"no id":    {Protocol: 1, Name: "n"},
		"no name":  {Protocol: 1, NodeID: "abc", Name: " "},
		"long":     {Protocol: 1, NodeID: "abc", Name: strings.Repeat("n", 500)},
		"run id":   {Protocol: 1, NodeID: "abc", Name: "n", Running: []RunState{{RunID: "a/b"}}},
		"no key":   {Protocol: ProtocolVersion, NodeID: "abc", Name: "n", Platform: "linux/amd64"},
		"bad key":  {Protocol: ProtocolVersion, NodeID: "abc", Name: "n", Platform: "linux/amd64", Key: "abcd"},
	} {
		if err := h.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
