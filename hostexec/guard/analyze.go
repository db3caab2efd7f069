package guard

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxctl/sandboxctl/internal/shellword"
	"mvdan.cc/sh/v3/syntax"
)

// Rule names the check that refused a command line or one of its segments.
// The values are stable strings so that tests, logs and UIs can branch on
// them.
type Rule string

// Analysis rules. Every refusal carries exactly one of these.
const (
	RuleEmpty            Rule = "empty"               // empty command or empty segment
	RuleControlChar      Rule = "control-character"   // NUL, CR or another C0 control (tab and newline are fine)
	RuleLineContinuation Rule = "line-continuation"   // backslash-newline anywhere
	RuleSubstitution     Rule = "substitution"        // $( ` <( >( anywhere, quoted or not
	RuleParse            Rule = "parse-error"         // the shell parser refused the line (unterminated quote, ...)
	RuleComment          Rule = "comment"             // # comments hide text from the reader
	RuleParamExpansion   Rule = "parameter-expansion" // $VAR ${VAR} $1 $@ ...
	RuleArithmetic       Rule = "arithmetic"          // $(( )) (( )) let
	RuleAnsiCQuote       Rule = "ansi-c-quote"        // $'...' and $"..."
	RuleGlob             Rule = "glob"                // unquoted * ? [ or extended globs
	RuleBrace            Rule = "brace-expansion"     // unquoted { }
	RuleTilde            Rule = "tilde"               // unquoted ~
	RuleRedirect         Rule = "redirect"            // a redirection other than 2>&1, >&2, >/dev/null
	RuleHeredoc          Rule = "heredoc"             // a here-document whose body can expand, or a here-string
	RuleBackground       Rule = "background"          // & (and zsh &| &!)
	RulePipeAll          Rule = "pipe-stderr"         // |&
	RuleNegation         Rule = "negation"            // ! cmd
	RuleCoprocess        Rule = "coprocess"           // coproc, mksh |&
	RuleSubshell         Rule = "subshell"            // ( ... )
	RuleGroup            Rule = "group"               // { ...; }
	RuleFunction         Rule = "function"            // f() { ... }
	RuleCompound         Rule = "compound"            // if for while until case select time
	RuleTestClause       Rule = "test-clause"         // [[ ... ]]
	RuleAssignment       Rule = "assignment"          // X=1 cmd, export, declare, local, readonly
	RuleUnknownNode      Rule = "unknown-node"        // any syntax node this package does not explicitly accept
	RuleNotFound         Rule = "not-found"           // the executable does not resolve on PATH
	RuleBuiltin          Rule = "shell-builtin"       // eval source . alias trap set hash ... (evaluate strings or change the shell)
	RuleWrapperOption    Rule = "wrapper-option"      // a wrapper option that cannot be analysed (sudo -s, env -C, bash -i ...)
	RuleWrapperSpoof     Rule = "wrapper-spoof"       // a shell or wrapper outside the trusted dirs or via a relative path (./sh)
	RuleCarrier          Rule = "carrier"             // runs input or strings it cannot analyse (xargs, busybox, fish, setsid, ...)
	RuleShellNoCommand   Rule = "shell-without-c"     // a shell reading a script file or stdin
	RuleEnvBlocked       Rule = "env-blocked"         // env/sudo assignment of a blocked variable (LD_PRELOAD, BASH_ENV, PATH, ...)
	RuleDepth            Rule = "depth"               // wrappers nested too deep
	RuleRelativeAfterCd  Rule = "relative-after-cd"   // ./prog after a cd in the same line
)

// DefaultTrustedDirs are the only directories a shell or wrapper (and, in
// Policy, a safe bin) may resolve into.
var defaultTrustedDirs = []string{"/bin", "/usr/bin", "/usr/local/bin"}

// DefaultTrustedDirs returns a fresh copy of the default trusted directories.
func DefaultTrustedDirs() []string { return slices.Clone(defaultTrustedDirs) }

const defaultMaxDepth = 4

// AnalyzeEnv is what the analyser needs to know about the host.
type AnalyzeEnv struct {
	// Path is the effective PATH of the host (colon separated). Empty and
	// relative entries are ignored.
	Path string
	// Cwd is the absolute working directory the command will start in (a
	// relative one is joined to the process cwd).
	Cwd string
	// TrustedDirs are the directories shells and wrappers must resolve in
	// (after symlinks); default /bin /usr/bin /usr/local/bin.
	TrustedDirs []string
	// Lookup, when set, replaces the PATH search for a bare command name
	// (tests). It must return an absolute path.
	Lookup func(name string) (string, error)
	// EnvCheck, when set, vets variables assigned through env/sudo
	// (`env K=V cmd`). The default refuses the loader/interpreter hook
	// variables of envguard and PATH. Plug envguard in here.
	EnvCheck func(assign map[string]string) error
	// MaxDepth bounds nested wrappers/shells; default 4.
	MaxDepth int
}

// Wrapper is one program a segment was run through.
type Wrapper struct {
	Kind     string   // "env", "shell", "nohup", "timeout", "nice", "stdbuf", "sudo", "exec", "command"
	Name     string   // as written
	Path     string   // absolute path found on PATH ("" for the exec/command builtins)
	Resolved string   // Path with symlinks resolved
	Argv     []string // the wrapper's own words, up to the wrapped command
}

// Segment is one simple command that will really run (after wrappers are
// peeled off), or the point where analysis refused.
type Segment struct {
	Index     int               // 1-based, in order of appearance
	Depth     int               // 0 at top level, +1 per shell -c
	Raw       string            // source text of the simple command as written
	Argv      []string          // literal argv of the command that runs (argv[0] as written)
	Path      string            // absolute path found on PATH, cleaned ("" for builtins and refusals)
	Resolved  string            // Path with symlinks and .. resolved
	Builtin   bool              // a shell builtin (only cd is accepted)
	Wrappers  []Wrapper         // outermost first
	Env       map[string]string // variables assigned through env/sudo wrappers
	ClearEnv  bool              // env -i
	Redirects []string          // accepted redirections (2>&1, >&2, >/dev/null, quoted here-docs)
	Cwds      []string          // the directories it may run in (more than one after a cd)
	Rule      Rule              // empty when the segment passed
	Detail    string            // why Rule refused it
}

// OK reports whether this segment passed analysis.
func (s Segment) OK() bool { return s.Rule == "" }

// Analysis is the outcome of Analyze.
type Analysis struct {
	Command  string    // the line as given
	OK       bool      // every segment passed and nothing was refused
	Rule     Rule      // the first refusal's rule ("" when OK)
	Reason   string    // the first refusal, human readable ("" when OK)
	Segments []Segment // what runs, in order; includes refused segments
	// Rebuilt is the command to execute when OK: the same structure with
	// every word single-quoted and every executable pinned to the absolute
	// path that was analysed, so globs and variables never expand and PATH
	// cannot change what runs.
	Rebuilt string
}

// Analyze parses a command line with mvdan.cc/sh/v3 and decides what it
// runs. It never executes anything and fails closed: any construct it does
// not explicitly accept refuses the whole line (see the package doc).
func Analyze(command string, env AnalyzeEnv) Analysis {
	if len(env.TrustedDirs) == 0 {
		env.TrustedDirs = defaultTrustedDirs
	}
	if env.MaxDepth <= 0 {
		env.MaxDepth = defaultMaxDepth
	}
	if env.EnvCheck == nil {
		env.EnvCheck = defaultEnvCheck
	}
	cwd := env.Cwd
	if cwd == "" || !filepath.IsAbs(cwd) {
		if wd, err := os.Getwd(); err == nil && cwd == "" {
			cwd = wd
		} else if cwd != "" {
			cwd = filepath.Join(wd, cwd)
		}
	}
	an := &analyzer{env: env, removed: map[*Segment]bool{}}
	a := Analysis{Command: command}
	if !filepath.IsAbs(cwd) {
		a.Rule = RuleNotFound
		a.Reason = fmt.Sprintf("%s: working directory %q is not absolute", RuleNotFound, cwd)
		return a
	}
	st := &scope{cwds: []string{filepath.Clean(cwd)}}
	rebuilt, ok := an.script(command, nil, 0, nil, st, env.Path)
	for _, s := range an.segs {
		if an.removed[s] {
			continue
		}
		s.Index = len(a.Segments) + 1
		a.Segments = append(a.Segments, *s)
	}
	if an.fail != nil || !ok {
		a.OK = false
		if an.fail == nil {
			an.fail = &failure{rule: RuleUnknownNode, msg: "analysis failed"}
		}
		a.Rule = an.fail.rule
		a.Reason = an.fail.String()
		return a
	}
	if len(a.Segments) == 0 {
		a.Rule = RuleEmpty
		a.Reason = fmt.Sprintf("%s: empty command", RuleEmpty)
		return a
	}
	a.OK = true
	a.Rebuilt = rebuilt
	return a
}

type failure struct {
	seg  *Segment // nil for the whole line
	rule Rule
	msg  string
}

func (f *failure) String() string {
	if f.seg != nil {
		return fmt.Sprintf("segment %d `%s`: %s: %s", f.seg.Index, f.seg.Raw, f.rule, f.msg)
	}
	return fmt.Sprintf("%s: %s", f.rule, f.msg)
}

type analyzer struct {
	env     AnalyzeEnv
	segs    []*Segment
	removed map[*Segment]bool // shell invocations replaced by their -c segments
	fail    *failure
}

// scope is the state threaded through one line: the possible working
// directories (a cd adds to them; none is ever dropped, so external-path
// checks see every directory a path may be relative to).
type scope struct {
	cwds  []string
	sawCd bool
}

func (an *analyzer) lineFail(owner *Segment, rule Rule, format string, args ...any) {
	if owner != nil {
		an.segFail(owner, rule, "in the -c string: "+format, args...)
		return
	}
	if an.fail == nil {
		an.fail = &failure{rule: rule, msg: fmt.Sprintf(format, args...)}
	}
}

func (an *analyzer) segFail(seg *Segment, rule Rule, format string, args ...any) {
	if seg.Rule == "" {
		seg.Rule = rule
		seg.Detail = fmt.Sprintf(format, args...)
	}
	if an.fail == nil {
		an.fail = &failure{seg: seg, rule: rule, msg: fmt.Sprintf(format, args...)}
	}
}

// substSeqs start a command or process substitution in some shell.
var substSeqs = [...]string{"$(", "`", "<(", ">("}

// lexical refuses byte sequences that are dangerous whatever the parser
// makes of them.
func lexical(src string) (Rule, string) {
	if !utf8.ValidString(src) {
		return RuleControlChar, "invalid UTF-8"
	}
	for i, r := range src {
		if (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r < 0xa0) {
			return RuleControlChar, fmt.Sprintf("control character %U at byte %d", r, i)
		}
		// Format characters (bidi overrides, zero-width joiners) and
		// line/paragraph separators make the text a human approves look
		// different from what runs.
		if unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return RuleControlChar, fmt.Sprintf("invisible or bidi character %U at byte %d", r, i)
		}
	}
	if i := strings.Index(src, "\\\n"); i >= 0 {
		return RuleLineContinuation, fmt.Sprintf("backslash-newline at byte %d", i)
	}
	for _, s := range substSeqs {
		if i := strings.Index(src, s); i >= 0 {
			return RuleSubstitution, fmt.Sprintf("%q at byte %d (refused even inside quotes)", s, i)
		}
	}
	return "", ""
}

// script analyses one shell program (the top-level line or a `sh -c`
// string) and returns it rebuilt.
// owner is the shell segment whose -c string this is (nil at top level).
func (an *analyzer) script(src string, owner *Segment, depth int, wrappers []Wrapper, st *scope, pathVar string) (string, bool) {
	if strings.TrimSpace(src) == "" {
		an.lineFail(owner, RuleEmpty, "empty command")
		return "", false
	}
	if rule, msg := lexical(src); rule != "" {
		an.lineFail(owner, rule, "%s", msg)
		return "", false
	}
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true))
	f, err := parser.Parse(strings.NewReader(src), "")
	if err != nil {
		an.lineFail(owner, RuleParse, "%v", err)
		return "", false
	}
	if len(f.Last) > 0 {
		an.lineFail(owner, RuleComment, "comment %q", "#"+f.Last[0].Text)
		return "", false
	}
	w := &walker{an: an, src: src, depth: depth, wrappers: wrappers, st: st, path: pathVar, owner: owner}
	ok := true
	for _, s := range f.Stmts {
		if !w.stmt(s) {
			ok = false
		}
	}
	// Defence in depth: whatever the structural walk accepted, a
	// substitution or expansion node anywhere refuses the line.
	if rule, msg := forbiddenNodes(f); rule != "" {
		ok = false
		an.lineFail(owner, rule, "%s", msg)
	}
	if !ok || an.fail != nil {
		return "", false
	}
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, f); err != nil {
		an.lineFail(owner, RuleUnknownNode, "printing the rebuilt command: %v", err)
		return "", false
	}
	return strings.TrimRight(b.String(), "\n"), true
}

func forbiddenNodes(f *syntax.File) (Rule, string) {
	var rule Rule
	var msg string
	syntax.Walk(f, func(n syntax.Node) bool {
		if rule != "" {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			rule, msg = RuleSubstitution, fmt.Sprintf("%T", n)
		case *syntax.ParamExp:
			rule, msg = RuleParamExpansion, fmt.Sprintf("%T", n)
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause:
			rule, msg = RuleArithmetic, fmt.Sprintf("%T", n)
		case *syntax.ExtGlob:
			rule, msg = RuleGlob, fmt.Sprintf("%T", n)
		case *syntax.BraceExp:
			rule, msg = RuleBrace, fmt.Sprintf("%T", n)
		case *syntax.Comment:
			rule, msg = RuleComment, "comment"
		}
		return true
	})
	return rule, msg
}

type walker struct {
	an       *analyzer
	src      string
	depth    int
	wrappers []Wrapper
	st       *scope
	path     string   // PATH in force for this script
	owner    *Segment // the shell segment whose -c string this is; its env is inherited
}

func (w *walker) text(n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(w.src) || s > e {
		return ""
	}
	return w.src[s:e]
}

// stmtText is the source of a statement without its trailing separator.
func (w *walker) stmtText(s *syntax.Stmt) string {
	if s.Cmd == nil {
		return w.text(s)
	}
	end := s.Cmd.End()
	for _, r := range s.Redirs {
		if r.End().After(end) {
			end = r.End()
		}
	}
	st, e := int(s.Pos().Offset()), int(end.Offset())
	if st < 0 || e > len(w.src) || st > e || s.Background || s.Coprocess || s.Disown {
		return w.text(s)
	}
	return w.src[st:e]
}

func (w *walker) newSeg(raw string) *Segment {
	seg := &Segment{
		Index:    len(w.an.segs) + 1,
		Depth:    w.depth,
		Raw:      raw,
		Wrappers: slices.Clone(w.wrappers),
		Cwds:     slices.Clone(w.st.cwds),
	}
	if w.owner != nil {
		seg.ClearEnv = w.owner.ClearEnv
		if len(w.owner.Env) > 0 {
			seg.Env = maps.Clone(w.owner.Env)
		}
	}
	w.an.segs = append(w.an.segs, seg)
	return seg
}

func (w *walker) stmt(s *syntax.Stmt) bool {
	if len(s.Comments) > 0 {
		seg := w.newSeg(w.text(s))
		w.an.segFail(seg, RuleComment, "comment %q", "#"+s.Comments[0].Text)
		return false
	}
	switch {
	case s.Background || s.Disown:
		seg := w.newSeg(w.text(s))
		w.an.segFail(seg, RuleBackground, "background (&) is refused")
		return false
	case s.Coprocess:
		seg := w.newSeg(w.text(s))
		w.an.segFail(seg, RuleCoprocess, "coprocess is refused")
		return false
	case s.Negated:
		seg := w.newSeg(w.text(s))
		w.an.segFail(seg, RuleNegation, "negation (!) is refused")
		return false
	}
	switch c := s.Cmd.(type) {
	case nil:
		seg := w.newSeg(w.text(s))
		w.an.segFail(seg, RuleEmpty, "statement without a command")
		return false
	case *syntax.CallExpr:
		return w.call(s, c)
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe:
			if len(s.Redirs) > 0 {
				seg := w.newSeg(w.text(s))
				w.an.segFail(seg, RuleRedirect, "redirection of a whole list")
				return false
			}
			okX := w.stmt(c.X)
			okY := w.stmt(c.Y)
			return okX && okY
		case syntax.PipeAll:
			seg := w.newSeg(w.text(s))
			w.an.segFail(seg, RulePipeAll, "|& is refused")
			return false
		default:
			seg := w.newSeg(w.text(s))
			w.an.segFail(seg, RuleUnknownNode, "operator %s is not accepted", c.Op)
			return false
		}
	}
	seg := w.newSeg(w.text(s))
	rule, what := RuleUnknownNode, fmt.Sprintf("%T", s.Cmd)
	switch s.Cmd.(type) {
	case *syntax.Subshell:
		rule = RuleSubshell
	case *syntax.Block:
		rule = RuleGroup
	case *syntax.FuncDecl:
		rule = RuleFunction
	case *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause, *syntax.TimeClause:
		rule = RuleCompound
	case *syntax.ArithmCmd, *syntax.LetClause:
		rule = RuleArithmetic
	case *syntax.TestClause, *syntax.TestDecl:
		rule = RuleTestClause
	case *syntax.DeclClause:
		rule = RuleAssignment
	case *syntax.CoprocClause:
		rule = RuleCoprocess
	}
	w.an.segFail(seg, rule, "%s is not accepted", what)
	return false
}

// redirects checks a statement's redirections; only 2>&1, >&2, 1>&2,
// [12]>/dev/null, [12]>>/dev/null, &>/dev/null and here-documents whose body
// cannot expand are accepted.
func (w *walker) redirects(seg *Segment, rs []*syntax.Redirect) bool {
	for _, r := range rs {
		txt := w.text(r)
		fd := ""
		if r.N != nil {
			fd = r.N.Value
		}
		if fd != "" && fd != "1" && fd != "2" {
			w.an.segFail(seg, RuleRedirect, "redirection %q: only fd 1 and 2", txt)
			return false
		}
		target := ""
		if r.Word != nil {
			target = plainLit(r.Word)
		}
		switch r.Op {
		case syntax.DplOut:
			if (target == "1" || target == "2") && target != fd && !(fd == "" && target == "1") {
				seg.Redirects = append(seg.Redirects, txt)
				continue
			}
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll:
			if target == "/dev/null" && (fd == "" || r.Op == syntax.RdrOut || r.Op == syntax.AppOut) {
				seg.Redirects = append(seg.Redirects, txt)
				continue
			}
		case syntax.Hdoc, syntax.DashHdoc:
			if fd != "" {
				break
			}
			if ok, why := literalHeredoc(r); ok {
				seg.Redirects = append(seg.Redirects, txt+" (here-document, literal body)")
				continue
			} else {
				w.an.segFail(seg, RuleHeredoc, "%s", why)
				return false
			}
		case syntax.WordHdoc:
			w.an.segFail(seg, RuleHeredoc, "here-string %q is refused", txt)
			return false
		}
		w.an.segFail(seg, RuleRedirect, "redirection %q is refused (only 2>&1, >&2, >/dev/null)", txt)
		return false
	}
	return true
}

// plainLit returns the word if it is exactly one unquoted literal without
// backslashes, else "".
func plainLit(w *syntax.Word) string {
	if len(w.Parts) != 1 {
		return ""
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	if !ok || strings.ContainsAny(l.Value, "\\") {
		return ""
	}
	return l.Value
}

func literalHeredoc(r *syntax.Redirect) (bool, string) {
	quoted := false
	for _, p := range r.Word.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted:
			if p.Dollar {
				return false, "here-document delimiter with $'...'"
			}
			quoted = true
		case *syntax.DblQuoted:
			if p.Dollar {
				return false, "here-document delimiter with $\"...\""
			}
			quoted = true
		case *syntax.Lit:
			if strings.Contains(p.Value, "\\") {
				quoted = true
			}
		default:
			return false, fmt.Sprintf("here-document delimiter contains %T", p)
		}
	}
	if r.Hdoc == nil {
		return true, ""
	}
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return false, fmt.Sprintf("here-document body expands (%T)", p)
		}
		if !quoted && strings.ContainsAny(l.Value, "$`\\") {
			return false, "unquoted here-document body contains $, ` or \\ (use <<'EOF')"
		}
	}
	return true, ""
}

// word turns a shell word into its literal value, or fails.
func word(wd *syntax.Word) (string, Rule, string) {
	var b strings.Builder
	for i, p := range wd.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for j := 0; j < len(v); j++ {
				c := v[j]
				if c == '\\' {
					if j+1 < len(v) {
						j++
						b.WriteByte(v[j])
					} else {
						b.WriteByte(c)
					}
					continue
				}
				switch c {
				case '*', '?', '[':
					return "", RuleGlob, fmt.Sprintf("unquoted %q in %q (quote it)", c, v)
				case '~':
					return "", RuleTilde, fmt.Sprintf("unquoted ~ in %q", v)
				case '{', '}':
					if !(len(wd.Parts) == 1 && v == "{}") {
						return "", RuleBrace, fmt.Sprintf("unquoted %q in %q (quote it)", c, v)
					}
				case '=':
					if i == 0 && j == 0 && len(v) > 1 {
						// zsh expands =cmd to a path
						return "", RuleGlob, fmt.Sprintf("word starting with = (%q)", v)
					}
				}
				b.WriteByte(c)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", RuleAnsiCQuote, "$'...' quoting is refused"
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", RuleAnsiCQuote, "$\"...\" quoting is refused"
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					r := RuleUnknownNode
					switch q.(type) {
					case *syntax.ParamExp:
						r = RuleParamExpansion
					case *syntax.CmdSubst, *syntax.ProcSubst:
						r = RuleSubstitution
					case *syntax.ArithmExp:
						r = RuleArithmetic
					}
					return "", r, fmt.Sprintf("%T inside double quotes", q)
				}
				v := l.Value
				for j := 0; j < len(v); j++ {
					if v[j] == '\\' && j+1 < len(v) && strings.IndexByte("$`\"\\\n", v[j+1]) >= 0 {
						j++
					}
					b.WriteByte(v[j])
				}
			}
		case *syntax.ParamExp:
			return "", RuleParamExpansion, "parameter expansion (non-literal word)"
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return "", RuleSubstitution, fmt.Sprintf("%T", p)
		case *syntax.ArithmExp:
			return "", RuleArithmetic, "arithmetic expansion"
		case *syntax.ExtGlob:
			return "", RuleGlob, "extended glob"
		case *syntax.BraceExp:
			return "", RuleBrace, "brace expansion"
		default:
			return "", RuleUnknownNode, fmt.Sprintf("%T is not accepted", p)
		}
	}
	v := b.String()
	// A decoded word that spells a substitution (echo $\( -> "$(") is
	// harmless here but becomes code if it reaches another shell or a
	// careless reader; refuse it like the raw text.
	for _, s := range substSeqs {
		if strings.Contains(v, s) {
			return "", RuleSubstitution, fmt.Sprintf("word decodes to %q (refused even when escaped)", s)
		}
	}
	if strings.Contains(v, "\\\n") {
		return "", RuleLineContinuation, "word decodes to a backslash-newline"
	}
	return v, "", ""
}

// quotedWords writes the pinned argv back as shell words (shellword.Quote:
// POSIX quoting, since the rebuilt line runs under whatever POSIX shell the
// host has). A word with no POSIX form is an error wrapping
// shellword.ErrUnquotable.
func quotedWords(argv []string) ([]*syntax.Word, error) {
	out := make([]*syntax.Word, len(argv))
	for i, a := range argv {
		q, err := shellword.Quote(a)
		if err != nil {
			return nil, fmt.Errorf("argv[%d]: %w", i, err)
		}
		if q == a && strings.ContainsAny(a, "{}") {
			// POSIX leaves a lone brace bare (`}0`); this analyser
			// refuses unquoted braces, so the rebuilt line must quote
			// them to be accepted again (FuzzAnalyze). A word the
			// quoter left bare holds no quote or special character.
			q = "'" + a + "'"
		}
		out[i] = &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: q}}}
	}
	return out, nil
}

func (w *walker) call(s *syntax.Stmt, c *syntax.CallExpr) bool {
	seg := w.newSeg(w.stmtText(s))
	if len(c.Assigns) > 0 {
		w.an.segFail(seg, RuleAssignment, "assignment %q in front of a command", w.text(c.Assigns[0]))
		return false
	}
	if len(c.Args) == 0 {
		w.an.segFail(seg, RuleEmpty, "no command")
		return false
	}
	if !w.redirects(seg, s.Redirs) {
		return false
	}
	argv := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		v, rule, msg := word(a)
		if rule != "" {
			w.an.segFail(seg, rule, "%s", msg)
			return false
		}
		argv = append(argv, v)
	}
	seg.Argv = argv
	pinned, ok := w.command(seg, argv, w.path)
	if !ok {
		return false
	}
	words, err := quotedWords(pinned)
	if err != nil {
		w.an.segFail(seg, RuleControlChar, "%v", err)
		return false
	}
	c.Args = words
	return true
}

// Names handled specially before any PATH lookup.
var (
	refusedBuiltins = map[string]string{
		"eval": "evaluates a string", "source": "runs a file in this shell", ".": "runs a file in this shell",
		"builtin": "runs shell builtins directly", "alias": "redefines commands", "unalias": "redefines commands",
		"trap": "evaluates a string later", "set": "changes shell options", "shopt": "changes shell options",
		"hash": "changes command lookup", "enable": "loads builtins", "fc": "re-runs history",
		"export": "changes the environment", "unset": "changes the environment", "declare": "assigns variables",
		"typeset": "assigns variables", "local": "assigns variables", "readonly": "assigns variables",
		"read": "assigns variables", "mapfile": "assigns variables", "readarray": "assigns variables",
		"let": "arithmetic", "getopts": "assigns variables", "bind": "changes key bindings",
		"complete": "changes completion", "compgen": "evaluates strings", "ulimit": "changes limits",
		"umask": "changes the umask", "jobs": "job control", "fg": "job control", "bg": "job control",
		"wait": "job control", "disown": "job control", "suspend": "job control", "coproc": "coprocess",
		"exit": "exits the shell", "return": "returns from a function", "shift": "shifts arguments",
		"pushd": "changes directory stack", "popd": "changes directory stack", "times": "shell builtin",
		"caller": "shell builtin", "history": "history", "autoload": "zsh builtin", "functions": "zsh builtin",
		"noglob": "zsh precommand", "nocorrect": "zsh precommand", "-": "zsh precommand",
	}
	// shells whose -c string is analysed recursively.
	analysedShells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ksh93": true, "lksh": true, "rbash": true, "posh": true, "yash": true}
	// programs that run input, strings or other programs in ways this
	// package does not analyse.
	refusedCarriers = map[string]string{
		"xargs": "runs its input as commands", "busybox": "multi-call binary (runs any applet, incl. sh)",
		"fish": "shell syntax not analysed", "csh": "shell syntax not analysed", "tcsh": "shell syntax not analysed",
		"nu": "shell syntax not analysed", "pwsh": "shell syntax not analysed", "elvish": "shell syntax not analysed",
		"xonsh": "shell syntax not analysed", "toybox": "multi-call binary", "setsid": "wrapper not analysed",
		"flock": "wrapper not analysed", "chroot": "wrapper not analysed", "watch": "runs a string through sh",
		"su": "runs a shell", "doas": "wrapper not analysed", "runuser": "runs a shell", "ionice": "wrapper not analysed",
		"chrt": "wrapper not analysed", "taskset": "wrapper not analysed", "script": "runs a shell",
		"strace": "wrapper not analysed", "ltrace": "wrapper not analysed", "time": "wrapper not analysed",
		"parallel": "runs its input as commands", "unbuffer": "wrapper not analysed", "nsenter": "wrapper not analysed",
		"unshare": "wrapper not analysed", "systemd-run": "wrapper not analysed", "sg": "runs a shell string",
		"newgrp": "runs a shell", "pkexec": "wrapper not analysed", "firejail": "wrapper not analysed",
		"expect": "runs scripts", "ssh": "runs a remote shell string", "dbus-launch": "wrapper not analysed",
		"start-stop-daemon": "wrapper not analysed", "daemonize": "wrapper not analysed", "catchsegv": "wrapper not analysed",
		"prlimit": "wrapper not analysed", "cgexec": "wrapper not analysed", "numactl": "wrapper not analysed",
		"faketime": "wrapper not analysed", "fakeroot": "wrapper not analysed", "proot": "wrapper not analysed",
		"bwrap": "wrapper not analysed", "rlwrap": "wrapper not analysed", "tsp": "wrapper not analysed",
	}
	analysedWrappers = map[string]bool{"env": true, "nohup": true, "timeout": true, "nice": true, "stdbuf": true, "sudo": true}
)

// IsShellOrWrapper reports whether an executable (by path or name) is a
// shell, a wrapper or a carrier: such executables are never written to an
// allowlist by allow-always.
func IsShellOrWrapper(pathOrName string) bool {
	b := filepath.Base(pathOrName)
	return analysedShells[b] || analysedWrappers[b] || refusedCarriers[b] != "" || refusedBuiltins[b] != "" ||
		b == "exec" || b == "command" || b == "cd" || isInterpreter(b)
}

// isInterpreter: language runtimes that run code given on their command
// line. They may be approved once, never persisted.
func isInterpreter(b string) bool {
	for _, p := range []string{"python", "perl", "ruby", "node", "nodejs", "php", "lua", "tclsh", "wish", "deno", "bun", "osascript", "Rscript", "julia", "awk", "gawk", "mawk", "nawk"} {
		if b == p || (strings.HasPrefix(b, p) && strings.Trim(b[len(p):], "0123456789.-") == "") {
			return true
		}
	}
	return false
}

// lookPath resolves name on pathVar (or relative to the scope's cwd when it
// contains a slash). It returns the cleaned absolute path and the path with
// symlinks resolved.
func (w *walker) lookPath(name, pathVar string) (string, string, error) {
	var p string
	switch {
	case strings.Contains(name, "/"):
		if filepath.IsAbs(name) {
			p = filepath.Clean(name)
		} else {
			if w.st.sawCd && len(w.st.cwds) > 1 {
				return "", "", errRelativeAfterCd
			}
			p = filepath.Join(w.st.cwds[len(w.st.cwds)-1], name)
		}
		if !isExecutable(p) {
			return "", "", fmt.Errorf("%s is not an executable file", p)
		}
	case w.an.env.Lookup != nil && pathVar == w.an.env.Path:
		lp, err := w.an.env.Lookup(name)
		if err != nil {
			return "", "", err
		}
		if !filepath.IsAbs(lp) {
			return "", "", fmt.Errorf("lookup of %q returned a relative path %q", name, lp)
		}
		p = filepath.Clean(lp)
	default:
		for _, dir := range filepath.SplitList(pathVar) {
			if dir == "" || !filepath.IsAbs(dir) {
				continue
			}
			cand := filepath.Join(dir, name)
			if isExecutable(cand) {
				p = cand
				break
			}
		}
		if p == "" {
			return "", "", fmt.Errorf("%q not found on PATH", name)
		}
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", "", fmt.Errorf("resolving %s: %w", p, err)
	}
	if !filepath.IsAbs(r) {
		r = filepath.Join(filepath.Dir(p), r)
	}
	return p, filepath.Clean(r), nil
}

var errRelativeAfterCd = errors.New("relative executable path after cd")

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func inDirs(p string, dirs []string) bool {
	d := filepath.Dir(p)
	for _, t := range dirs {
		if d == filepath.Clean(t) {
			return true
		}
	}
	return false
}
