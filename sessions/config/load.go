package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/audit/policy"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// ErrInvalid marks every configuration error; *Error carries the key and line.
var ErrInvalid = errors.New("invalid configuration")

// Error names the offending key (dotted path) and its line in the file.
type Error struct {
	File string
	Key  string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("config %s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("config %s: %s: %s", loc, e.Key, e.Msg)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Load reads the YAML file at path over the defaults. An empty path returns
// the defaults. Unknown keys and bad values are *Error values naming the key
// and line; nothing is partially applied.
func Load(path string) (File, error) {
	if path == "" {
		f := Default()
		return f, f.Validate()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load for bytes already read; name is used in errors. It
// returns the first problem of Check. A valid file, the usual case, is
// decoded in one strict pass (every CLI command parses its configuration
// on its way to the daemon); Check runs only to find and word what is
// wrong with one that is not, so both give the same File.
func Parse(name string, data []byte) (File, error) {
	if f, ok := decodeValid(data); ok {
		return f, nil
	}
	f, problems := Check(name, data)
	if len(problems) > 0 {
		return File{}, problems[0]
	}
	return f, nil
}

// decodeValid decodes data over the defaults, refusing unknown keys, and
// reports whether that gave a valid configuration.
func decodeValid(data []byte) (File, bool) {
	f := Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return File{}, false
	}
	return f, f.Validate() == nil
}

// Check parses data (the file name) once and returns the configuration
// and every problem of the file, not only the first, in the order they
// were found: malformed YAML; unknown or duplicate keys and values of the
// wrong type, each with its line; then the bad values Validate finds, one
// per key. f is meaningful only without problems.
func Check(name string, data []byte) (f File, problems []*Error) {
	f = Default()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return f, validateAll(name, f, nil, nil) // empty file: defaults
		}
		return File{}, []*Error{{File: name, Msg: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if len(doc.Content) == 0 {
		return f, validateAll(name, f, nil, nil)
	}
	root := doc.Content[0]
	lines := map[string]int{}
	// check reports what cannot be decoded and cuts it out of the tree,
	// so the rest still decodes and is validated.
	if !check(name, "", root, reflect.TypeOf(f), lines, &problems) {
		return File{}, problems
	}
	if err := root.Decode(&f); err != nil {
		return File{}, append(problems, &Error{File: name, Msg: err.Error()})
	}
	return f, append(problems, validateAll(name, f, root, lines)...)
}

// validateAll runs Validate until it finds nothing more: each problem is
// recorded, its key cut out of root (so it takes its default) and the rest
// validated again. Without a tree (defaults) there is one pass.
func validateAll(name string, f File, root *yaml.Node, lines map[string]int) []*Error {
	var problems []*Error
	seen := map[string]bool{}
	for {
		err := f.Validate()
		if err == nil {
			return problems
		}
		var ce *Error
		if !errors.As(err, &ce) {
			return append(problems, &Error{File: name, Msg: err.Error()})
		}
		ce.File, ce.Line = name, lineOf(lines, ce.Key)
		if seen[ce.Key] {
			return problems
		}
		seen[ce.Key] = true
		problems = append(problems, ce)
		if root == nil || !removeKey(root, ce.Key) {
			return problems
		}
		f = Default()
		if err := root.Decode(&f); err != nil {
			return append(problems, &Error{File: name, Msg: err.Error()})
		}
	}
}

// removeKey cuts the node of the dotted key (or of its closest parent
// that is in the tree) out of root; false when no part of it is there.
func removeKey(root *yaml.Node, key string) bool {
	var parent, node *yaml.Node
	idx := -1
	cur := root
	for _, seg := range strings.Split(key, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		next, at := mappingValue(cur, name)
		if next == nil {
			break
		}
		parent, node, idx, cur = cur, next, at, next
		for rest != "" {
			var n int
			if _, err := fmt.Sscanf(rest, "%d]", &n); err != nil || cur.Kind != yaml.SequenceNode || n >= len(cur.Content) {
				rest = ""
				break
			}
			parent, node, idx, cur = cur, cur.Content[n], n, cur.Content[n]
			_, rest, _ = strings.Cut(rest, "[")
		}
	}
	if node == nil {
		return false
	}
	if parent.Kind == yaml.SequenceNode {
		parent.Content = append(parent.Content[:idx], parent.Content[idx+1:]...)
	} else {
		parent.Content = append(parent.Content[:idx], parent.Content[idx+2:]...)
	}
	return true
}

// mappingValue finds key in mapping n: its value and the index of its key
// node.
func mappingValue(n *yaml.Node, key string) (*yaml.Node, int) {
	if n.Kind != yaml.MappingNode {
		return nil, -1
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1], i
		}
	}
	return nil, -1
}

// lineOf finds the line of key or of its closest parent.
func lineOf(lines map[string]int, key string) int {
	for k := key; k != ""; {
		if l, ok := lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// check walks the YAML tree beside the Go type: unknown keys and values
// that do not decode into their field are added to problems with key and
// line, and cut out of the tree. It returns false when n itself cannot be
// decoded (its parent cuts it out).
func check(file, path string, n *yaml.Node, t reflect.Type, lines map[string]int, problems *[]*Error) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	bad := func(line int, msg string) bool {
		*problems = append(*problems, &Error{File: file, Key: path, Line: line, Msg: msg})
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return true
			}
			return bad(n.Line, fmt.Sprintf("want a mapping, got %s", describe(n)))
		}
		fields := map[string]reflect.StructField{}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := strings.Split(sf.Tag.Get("yaml"), ",")[0]
			if tag != "" && tag != "-" {
				fields[tag] = sf
			}
		}
		seen := map[string]bool{}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			sf, ok := fields[k.Value]
			switch {
			case !ok:
				*problems = append(*problems, &Error{File: file, Key: key, Line: k.Line, Msg: "unknown key" + suggest(k.Value, fields)})
				continue
			case seen[k.Value]:
				*problems = append(*problems, &Error{File: file, Key: key, Line: k.Line, Msg: "duplicate key"})
				continue
			}
			seen[k.Value] = true
			lines[key] = k.Line
			if check(file, key, v, sf.Type, lines, problems) {
				kept = append(kept, k, v)
			}
		}
		n.Content = kept
		return true
	case reflect.Slice:
		if n.Tag == "!!null" {
			return true
		}
		if n.Kind != yaml.SequenceNode {
			return bad(n.Line, fmt.Sprintf("want a list, got %s", describe(n)))
		}
		kept := n.Content[:0]
		for i, item := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			lines[key] = item.Line
			if check(file, key, item, t.Elem(), lines, problems) {
				kept = append(kept, item)
			}
		}
		n.Content = kept
		return true
	case reflect.Map:
		if n.Tag == "!!null" {
			return true
		}
		if n.Kind != yaml.MappingNode {
			return bad(n.Line, fmt.Sprintf("want a mapping, got %s", describe(n)))
		}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			lines[key] = k.Line
			if check(file, key, v, t.Elem(), lines, problems) {
				kept = append(kept, k, v)
			}
		}
		n.Content = kept
		return true
	default:
		if n.Kind != yaml.ScalarNode {
			return bad(n.Line, fmt.Sprintf("want a %s, got %s", kindName(t), describe(n)))
		}
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			return bad(n.Line, fmt.Sprintf("want a %s, got %q", kindName(t), n.Value))
		}
		return true
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return strconv.Quote(n.Value)
	}
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true/false)"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "whole number"
	case reflect.Float64, reflect.Float32:
		return "number"
	default:
		return t.Kind().String()
	}
}

// suggest names a known key that differs only in case, a common slip.
func suggest(key string, fields map[string]reflect.StructField) string {
	for k := range fields {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf(" (did you mean %q?)", k)
		}
	}
	return ""
}

// Validate checks enumerations and ranges; errors carry the dotted key.
func (f File) Validate() error {
	oneOf := func(key, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return &Error{Key: key, Msg: fmt.Sprintf("%q is not one of %s", v, strings.Join(allowed, ", "))}
	}
	// parsed names the key of a value its vocab parser refused.
	parsed := func(key string, err error) error {
		var me *vocab.ModeError
		if errors.As(err, &me) {
			return &Error{Key: key, Msg: fmt.Sprintf("%q is not one of %s", me.Value, strings.Join(me.Valid, ", "))}
		}
		return nil
	}
	e := f.Exec
	_, hostErr := vocab.ParseHost(string(e.Host))
	_, secErr := vocab.ParseSecurity(string(e.Security))
	_, askErr := vocab.ParseAsk(string(e.Ask))
	_, fbErr := vocab.ParseSecurity(string(e.AskFallback))
	_, lvlErr := vocab.ParseElevatedLevel(string(f.Elevated.DefaultLevel))
	for _, c := range []error{
		parsed("exec.host", hostErr),
		parsed("exec.security", secErr),
		parsed("exec.ask", askErr),
		parsed("exec.askFallback", fbErr),
		parsed("elevated.defaultLevel", lvlErr),
		oneOf("sandbox.scope", f.Sandbox.Scope, "session", "agent", "shared"),
		oneOf("sandbox.workspaceAccess", f.Sandbox.WorkspaceAccess, "none", "ro", "rw"),
	} {
		if c != nil {
			return c
		}
	}
	nonNeg := map[string]int{
		"exec.backgroundMs": e.BackgroundMs, "exec.timeoutSec": e.TimeoutSec, "exec.cleanupMs": e.CleanupMs,
		"exec.maxOutputChars": e.MaxOutputChars, "exec.pendingMaxOutputChars": e.PendingMaxOutputChars,
		"exec.backgroundTimeoutSec": e.BackgroundTimeoutSec, "exec.approvalTimeoutSec": e.ApprovalTimeoutSec,
	}
	for _, k := range []string{"exec.backgroundMs", "exec.timeoutSec", "exec.cleanupMs", "exec.maxOutputChars", "exec.pendingMaxOutputChars", "exec.backgroundTimeoutSec", "exec.approvalTimeoutSec"} {
		if nonNeg[k] < 0 {
			return &Error{Key: k, Msg: fmt.Sprintf("must be >= 0, got %d", nonNeg[k])}
		}
	}
	for i, b := range e.SafeBins {
		if b == "" || strings.ContainsAny(b, "/ \t") {
			return &Error{Key: fmt.Sprintf("exec.safeBins[%d]", i), Msg: fmt.Sprintf("%q is not a bare program name", b)}
		}
	}
	if e.ApprovalHook != "" && !filepath.IsAbs(e.ApprovalHook) {
		return &Error{Key: "exec.approvalHook", Msg: fmt.Sprintf("%q is not an absolute path", e.ApprovalHook)}
	}
	if e.Envelope.UID <= 0 || e.Envelope.GID <= 0 || e.Envelope.UID > 1<<32-2 || e.Envelope.GID > 1<<32-2 {
		return &Error{Key: "exec.envelope", Msg: fmt.Sprintf("uid %d and gid %d must be between 1 and %d: gateway commands never run as root", e.Envelope.UID, e.Envelope.GID, 1<<32-2)}
	}
	for _, l := range []struct {
		key   string
		paths []string
	}{{"exec.envelope.writable", e.Envelope.Writable}, {"exec.envelope.secrets", e.Envelope.Secrets}} {
		for i, p := range l.paths {
			if !filepath.IsAbs(p) && p != "~" && !strings.HasPrefix(p, "~/") {
				return &Error{Key: fmt.Sprintf("%s[%d]", l.key, i), Msg: fmt.Sprintf("%q is not an absolute path", p)}
			}
		}
	}
	for i, p := range e.PathPrepend {
		if !filepath.IsAbs(p) {
			return &Error{Key: fmt.Sprintf("exec.pathPrepend[%d]", i), Msg: fmt.Sprintf("%q is not an absolute directory", p)}
		}
	}
	if f.Sandbox.Prune.IdleHours < 0 || f.Sandbox.Prune.MaxAgeDays < 0 || math.IsNaN(f.Sandbox.Prune.IdleHours) || math.IsNaN(f.Sandbox.Prune.MaxAgeDays) {
		return &Error{Key: "sandbox.prune", Msg: "idleHours and maxAgeDays must be >= 0 (0 disables)"}
	}
	if err := f.Sandbox.Validate(); err != nil {
		var ce *sandboxconfig.ConfigError
		if errors.As(err, &ce) {
			msg := ce.Msg
			if ce.Value != "" {
				msg = fmt.Sprintf("%q: %s", ce.Value, ce.Msg)
			}
			return &Error{Key: ce.Field, Msg: msg}
		}
		return &Error{Key: "sandbox", Msg: err.Error()}
	}
	if err := f.Limits.validate(); err != nil {
		return err
	}
	if err := f.Audit.validate(); err != nil {
		return err
	}
	if strings.TrimSpace(f.State) == "" {
		return &Error{Key: "state", Msg: "must not be empty"}
	}
	return nil
}

// ExpandHome replaces a leading ~ in p with the user's home directory.
func ExpandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: expand %s: %w", p, err)
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}

// ApplyEnv applies the environment variables that override config values
// (docs/configuration.md, "Environment variables"), read through getenv;
// each has its PI_BASH_* alias, and the SANDBOXCTL_ name wins. A value that
// is not a non-negative whole number is an error naming the variable.
func (f *File) ApplyEnv(getenv func(string) string) error {
	for _, o := range []struct {
		knob envknob.Knob
		dst  *int
	}{
		{envknob.YieldMs, &f.Exec.BackgroundMs},
		{envknob.MaxOutputChars, &f.Exec.MaxOutputChars},
		{envknob.PendingMaxOutputChars, &f.Exec.PendingMaxOutputChars},
		{envknob.JobTTLMs, &f.Exec.CleanupMs},
	} {
		raw, name := o.knob.GetFrom(getenv)
		if raw == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 0 {
			return &Error{File: "environment", Key: string(name), Msg: fmt.Sprintf("want a non-negative whole number, got %q", raw)}
		}
		*o.dst = n
	}
	return nil
}

// validate checks that every limit is positive and no per-agent cap exceeds
// its global one.
func (l Limits) validate() error {
	a, s := l.Approvals, l.Sessions
	for _, c := range []struct {
		key string
		v   int
	}{
		{"limits.approvals.pendingPerAgent", a.PendingPerAgent}, {"limits.approvals.pending", a.Pending},
		{"limits.approvals.requestBytes", a.RequestBytes}, {"limits.approvals.retained", a.Retained},
		{"limits.sessions.runningPerAgent", s.RunningPerAgent}, {"limits.sessions.running", s.Running},
		{"limits.sessions.retainedPerAgent", s.RetainedPerAgent}, {"limits.sessions.retained", s.Retained},
	} {
		if c.v <= 0 {
			return &Error{Key: c.key, Msg: fmt.Sprintf("must be a positive whole number, got %d", c.v)}
		}
	}
	for _, c := range []struct {
		key          string
		agent, total int
		totalKey     string
	}{
		{"limits.approvals.pendingPerAgent", a.PendingPerAgent, a.Pending, "limits.approvals.pending"},
		{"limits.sessions.runningPerAgent", s.RunningPerAgent, s.Running, "limits.sessions.running"},
		{"limits.sessions.retainedPerAgent", s.RetainedPerAgent, s.Retained, "limits.sessions.retained"},
	} {
		if c.agent > c.total {
			return &Error{Key: c.key, Msg: fmt.Sprintf("%d is over %s (%d)", c.agent, c.totalKey, c.total)}
		}
	}
	return nil
}

// validate checks the audit section; zero values (a configuration built in
// code) take the defaults.
func (a Audit) validate() error {
	if a.OnFailure != "" {
		if _, err := policy.ParseFailureMode(string(a.OnFailure)); err != nil {
			return &Error{Key: "audit.onFailure", Msg: err.Error()}
		}
	}
	seg := cmp.Or(a.MaxSegmentBytes, policy.DefaultMaxSegmentBytes)
	if seg < 4096 {
		return &Error{Key: "audit.maxSegmentBytes", Msg: fmt.Sprintf("must be at least 4096, got %d", a.MaxSegmentBytes)}
	}
	if a.MaxBytes != 0 && a.MaxBytes < 2*seg {
		return &Error{Key: "audit.maxBytes", Msg: fmt.Sprintf("must be at least twice audit.maxSegmentBytes (%d), got %d", 2*seg, a.MaxBytes)}
	}
	if a.SigningKey != "" && !filepath.IsAbs(a.SigningKey) && !strings.HasPrefix(a.SigningKey, "~/") {
		return &Error{Key: "audit.signingKey", Msg: fmt.Sprintf("%q is not an absolute path", a.SigningKey)}
	}
	return nil
}
