package guard

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxctl/sandboxctl/vocab"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// Policy is the guard configuration of one host for one request, after
// EffectiveModes has combined configuration and request.
type Policy struct {
	Security    vocab.Security
	Ask         vocab.Ask
	AskFallback vocab.Security // deny (default when empty), allowlist, full
	// SafeBins lists the safe bins; nil means DefaultSafeBins, an empty
	// non-nil slice means none.
	SafeBins []string
	// SafeBinProfiles overrides DefaultSafeBinProfiles when non-nil. A safe
	// bin without a profile is never safe.
	SafeBinProfiles map[string]SafeBinProfile
	// TrustedDirs are where safe bins must resolve; default /bin /usr/bin
	// /usr/local/bin. Compared exactly (case-sensitive).
	TrustedDirs []string
	// Allowlist is the agent's allowlist (its own entries plus "*").
	Allowlist []Entry
	// Workspace, when set (gateway), turns on the external-directory check:
	// path arguments of cd rm cp mv mkdir touch chmod chown cat that resolve
	// outside it need approval.
	Workspace string
	// ExternalAllow are absolute path globs (allowlist syntax) that are not
	// treated as external.
	ExternalAllow []string
	// UntrustedDirs are directories a sandbox (or anyone but the operator)
	// can write: the sandbox workspace root, sandbox-owned workspaces, rw
	// bind sources. An executable in one of them, or anywhere that is not
	// a root-owned path writable only by its owner (see securePath), never
	// satisfies an allowlist entry or a safe bin.
	UntrustedDirs []string
	// PTY says the command runs with a terminal: pagers and editors then
	// take typed shell escapes and never satisfy an entry (Gadget).
	PTY bool
}

// Hit is an allowlist entry that satisfied a segment.
type Hit struct {
	EntryID      string
	Pattern      string
	Segment      int    // Segment.Index
	ResolvedPath string // what the entry matched
}

// SegmentVerdict says how one segment was (not) satisfied.
type SegmentVerdict struct {
	Index     int
	Satisfied bool
	By        string // "allowlist <pattern>", "safe bin", "builtin cd"
	Reason    string // why not, when not satisfied
}

// Verdict is Evaluate's answer.
type Verdict struct {
	Decision vocab.Decision
	Reason   string
	// Command is what to execute with `SHELL -c` when Decision is Run (or
	// after approval): Analysis.Rebuilt (every word single-quoted, every
	// executable pinned) when analysis passed, else the original line
	// (security full, or a human approved it as shown).
	Command string
	// Satisfied: analysis passed, every segment is allowlisted, a safe bin
	// or builtin cd, and no path argument is external.
	Satisfied        bool
	RequiresApproval bool
	Hits             []Hit
	Segments         []SegmentVerdict
	External         []string // external paths that need approval
	// Confine is the workspace the command must run confined to (Landlock,
	// see ConfineWorkspace), or "": set when the decision relied on the
	// external-directory check finding every path inside the workspace.
	Confine string
	// outside is every path ExternalPaths found, ExternalAllow or not.
	outside []string
}

// Evaluate decides whether an analysed command may run (SECURITY.md, "The guard"):
//
//   - security deny → Deny.
//   - security full → Run, unless ask is always (or ask is on-miss and a
//     path argument is external, or the workspace is set and the line
//     could not be analysed, so its paths could not be checked) →
//     ApprovalPending.
//   - security allowlist → requiresApproval = ask==always || (ask==on-miss
//     && (!analysisOk || !satisfied)) → ApprovalPending; else Run when
//     satisfied; else Deny.
//
// Invalid modes deny (fail closed).
func (p Policy) Evaluate(a Analysis) Verdict {
	v := Verdict{Command: a.Command}
	if a.OK {
		v.Command = a.Rebuilt
	}
	if !p.Security.Valid() {
		v.Decision, v.Reason = vocab.DecisionDeny, fmt.Sprintf("invalid security mode %q", p.Security)
		return v
	}
	if !p.Ask.Valid() {
		v.Decision, v.Reason = vocab.DecisionDeny, fmt.Sprintf("invalid ask mode %q", p.Ask)
		return v
	}
	if p.Security == vocab.SecurityDeny {
		v.Decision, v.Reason = vocab.DecisionDeny, "security is deny: every command is refused"
		return v
	}
	sat, why := p.satisfy(a, &v)
	v.Satisfied = sat
	v.Confine = p.ConfineWorkspace(a, v.outside)
	switch p.Security {
	case vocab.SecurityFull:
		switch {
		case p.Ask == vocab.AskAlways:
			v.RequiresApproval = true
			v.Decision, v.Reason = vocab.DecisionApprovalPending, "ask is always"
		case p.Ask == vocab.AskOnMiss && len(v.External) > 0:
			v.RequiresApproval = true
			v.Decision, v.Reason = vocab.DecisionApprovalPending, "path outside the workspace: "+strings.Join(v.External, ", ")
		case p.Ask == vocab.AskOnMiss && p.Workspace != "" && !a.OK:
			// The check cannot see the paths of a line it cannot
			// analyse (a glob, a variable, a redirect): a person
			// decides on it as shown, as in allowlist mode.
			v.RequiresApproval = true
			v.Decision, v.Reason = vocab.DecisionApprovalPending, "the external-directory check cannot see the paths of this line: "+a.Reason
		default:
			v.Decision, v.Reason = vocab.DecisionRun, "security is full"
		}
	case vocab.SecurityAllowlist:
		v.RequiresApproval = RequiresApproval(p.Ask, p.Security, a.OK, sat)
		switch {
		case v.RequiresApproval && p.Ask == vocab.AskAlways:
			v.Decision, v.Reason = vocab.DecisionApprovalPending, "ask is always"
		case v.RequiresApproval:
			v.Decision, v.Reason = vocab.DecisionApprovalPending, why
		case sat:
			v.Decision, v.Reason = vocab.DecisionRun, "allowlist satisfied"
		default:
			v.Decision, v.Reason = vocab.DecisionDeny, why+" (ask is off)"
		}
	}
	return v
}

// Fallback is the verdict when an approval request expired undecided:
// askFallback deny (default) denies, allowlist runs only when satisfied,
// full runs.
func (p Policy) Fallback(a Analysis) Verdict {
	q := p
	q.Ask = vocab.AskOff
	switch p.AskFallback {
	case vocab.SecurityFull:
		q.Security = vocab.SecurityFull
		v := q.Evaluate(a)
		v.Reason = "approval expired; askFallback full: " + v.Reason
		return v
	case vocab.SecurityAllowlist:
		q.Security = vocab.SecurityAllowlist
		v := q.Evaluate(a)
		v.Reason = "approval expired; askFallback allowlist: " + v.Reason
		return v
	case vocab.SecurityDeny, "":
		v := Verdict{Decision: vocab.DecisionDeny, Reason: "approval expired; askFallback deny", Command: a.Command}
		return v
	}
	return Verdict{Decision: vocab.DecisionDeny, Reason: fmt.Sprintf("approval expired; invalid askFallback %q", p.AskFallback), Command: a.Command}
}

// satisfy fills v.Segments, v.Hits and v.External and says whether the
// allowlist is satisfied, and if not, why.
func (p Policy) satisfy(a Analysis, v *Verdict) (bool, string) {
	reasons := []string{}
	if !a.OK {
		reasons = append(reasons, "analysis refused: "+a.Reason)
	}
	for _, s := range a.Segments {
		sv := SegmentVerdict{Index: s.Index}
		switch {
		case !s.OK():
			sv.Reason = fmt.Sprintf("%s: %s", s.Rule, s.Detail)
		case s.Builtin:
			sv.Satisfied, sv.By = true, "builtin cd"
		case p.unallowedPrivilege(s) != "":
			// sudo is analysed through, but a privilege change is never
			// satisfied by the inner command alone: sudo itself must be
			// allowlisted (safe bins do not count under sudo).
			sv.Reason = p.unallowedPrivilege(s)
			if a.OK {
				reasons = append(reasons, fmt.Sprintf("segment %d `%s`: %s", s.Index, s.Raw, sv.Reason))
			}
		case p.untrusted(s) != "":
			sv.Reason = p.untrusted(s)
			if a.OK {
				reasons = append(reasons, fmt.Sprintf("segment %d `%s`: %s", s.Index, s.Raw, sv.Reason))
			}
		default:
			// An entry or a safe bin would cover the program; an argv that
			// carries a gadget of it still misses.
			e, hit := p.match(s)
			safe, whyNot := false, ""
			if !hit {
				safe, whyNot = p.safeBin(s)
			}
			switch g := p.gadget(s); {
			case (hit || safe) && g != "":
				sv.Reason = g
			case hit:
				sv.Satisfied, sv.By = true, "allowlist "+e.Pattern
				v.Hits = append(v.Hits, Hit{EntryID: e.ID, Pattern: e.Pattern, Segment: s.Index, ResolvedPath: s.Resolved})
			case safe:
				sv.Satisfied, sv.By = true, "safe bin"
			case g != "":
				sv.Reason = fmt.Sprintf("%s is not allowlisted (%s); and %s", s.Resolved, whyNot, g)
			default:
				sv.Reason = fmt.Sprintf("%s is not allowlisted (%s)", s.Resolved, whyNot)
			}
			if !sv.Satisfied && a.OK {
				reasons = append(reasons, fmt.Sprintf("segment %d `%s`: %s", s.Index, s.Raw, sv.Reason))
			}
		}
		v.Segments = append(v.Segments, sv)
	}
	if p.Workspace != "" {
		v.outside = ExternalPaths(a, p.Workspace)
		for _, e := range v.outside {
			if !p.externalAllowed(e) {
				v.External = append(v.External, e)
			}
		}
		if len(v.External) > 0 {
			reasons = append(reasons, "path outside the workspace: "+strings.Join(v.External, ", "))
		}
	}
	if len(reasons) > 0 {
		return false, strings.Join(reasons, "; ")
	}
	return a.OK && len(a.Segments) > 0, ""
}

// unallowedPrivilege names a sudo wrapper of s that is not itself
// allowlisted, or returns "".
func (p Policy) unallowedPrivilege(s Segment) string {
	for _, w := range s.Wrappers {
		if w.Kind != "sudo" {
			continue
		}
		if _, ok := p.match(Segment{Argv: w.Argv, Path: w.Path, Resolved: w.Resolved}); !ok {
			return fmt.Sprintf("privilege change through %s: sudo itself is not allowlisted", w.Resolved)
		}
	}
	return ""
}

// match finds the first allowlist entry that s satisfies. A bare-name
// entry matches only an executable found on PATH (argv[0] without a slash)
// in the trusted dirs, under its own name or its target's; an entry with an
// argv pattern matches only exactly those arguments.
func (p Policy) match(s Segment) (Entry, bool) {
	viaPath := len(s.Argv) > 0 && !strings.Contains(s.Argv[0], "/")
	trusted := p.trustedDirs()
	for _, e := range p.Allowlist {
		head, args, err := ParsePattern(e.Pattern)
		if err != nil {
			continue
		}
		if !strings.Contains(head, "/") && (!viaPath || !inDirs(s.Path, trusted) || !inDirs(s.Resolved, trusted)) {
			continue
		}
		if args != nil && (len(s.Argv) == 0 || !slices.Equal(s.Argv[1:], args)) {
			continue
		}
		if ok, err := MatchPattern(head, s.Path, s.Resolved); err == nil && ok {
			return e, true
		}
	}
	return Entry{}, false
}

// gadget says why s's argv can make its program run a command, load code
// or write a file it names (Gadget), or "".
func (p Policy) gadget(s Segment) string {
	arg, why := Gadget(s.Argv, p.PTY, segmentNames(s)...)
	if why == "" {
		if spec, ok := gadgetSpecFor(segmentNames(s)...); ok && spec.cwdConfig != "" {
			for _, c := range s.Cwds {
				if bad := p.untrustedDir(c); bad != "" {
					return fmt.Sprintf("%s %s, and %s (never satisfied by an allowlist entry; approve it as a whole)", spec.cwdConfig, c, bad)
				}
			}
		}
		return ""
	}
	return fmt.Sprintf("%s: `%s` %s (never satisfied by an allowlist entry; approve it as a whole)", filepath.Base(s.Resolved), arg, why)
}

// segmentNames are the base names a segment's program runs as: as written,
// as found on PATH and its symlink-free target.
func segmentNames(s Segment) []string {
	var out []string
	for _, n := range []string{firstArg(s.Argv), s.Path, s.Resolved} {
		if n != "" {
			out = append(out, filepath.Base(n))
		}
	}
	return out
}

func firstArg(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

// untrusted says why s's executable lies where a sandbox (or another user)
// can write it, or "".
func (p Policy) untrusted(s Segment) string {
	for _, f := range []string{s.Path, s.Resolved} {
		if f == "" {
			continue
		}
		for _, d := range p.UntrustedDirs {
			if under(f, d) {
				return fmt.Sprintf("%s is in %s, which a sandbox can write: never allowlisted", f, d)
			}
		}
	}
	for _, f := range []string{s.Resolved, s.Path} {
		if f == "" {
			continue
		}
		if err := securePath(f); err != nil {
			return fmt.Sprintf("%s: %v: never allowlisted", f, err)
		}
		if s.Path == s.Resolved {
			break
		}
	}
	return ""
}

// untrustedDir says why a sandbox (or another user) can write directory d,
// or "".
func (p Policy) untrustedDir(d string) string {
	for _, u := range p.UntrustedDirs {
		if under(d, u) {
			return fmt.Sprintf("%s is in %s, which a sandbox can write", d, u)
		}
	}
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		return fmt.Sprintf("cannot resolve %s: %v", d, err)
	}
	if err := securePath(r); err != nil {
		return err.Error()
	}
	if r != d {
		for _, u := range p.UntrustedDirs {
			if under(r, u) {
				return fmt.Sprintf("%s (%s) is in %s, which a sandbox can write", d, r, u)
			}
		}
	}
	return ""
}

// under reports whether f is dir or inside it, comparing cleaned paths and
// dir's symlink-free form.
func under(f, dir string) bool {
	if dir == "" || !filepath.IsAbs(dir) {
		return false
	}
	dirs := []string{filepath.Clean(dir)}
	if r, err := filepath.EvalSymlinks(dir); err == nil && r != dirs[0] {
		dirs = append(dirs, r)
	}
	for _, d := range dirs {
		if f == d || strings.HasPrefix(f, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

func (p Policy) externalAllowed(path string) bool {
	for _, g := range p.ExternalAllow {
		if !strings.HasPrefix(g, "/") {
			continue
		}
		if ok, err := MatchPattern(g, path, path); err == nil && ok {
			return true
		}
	}
	return false
}

// ConfineWorkspace says which directory a command that may run must be
// confined to, so that the kernel enforces at use what the
// external-directory check saw (issue 12 item 9: the command opens its
// paths by name after the check, and a concurrent writer of the workspace
// can swap a symlink in between). It is p.Workspace when the decision
// relies on the check having passed:
//
//   - the external-directory check is on (Workspace set),
//   - the analysis passed (a refused line is approved by a human as shown,
//     never on the check's word),
//   - at least one segment runs one of the external-directory commands
//     (cd rm cp mv mkdir touch chmod chown cat, or a program whose path
//     options are parsed: tar zip unzip wget curl), so the check looked at
//     paths,
//   - outside (what ExternalPaths found, before ExternalAllow) is empty: a
//     path a human approved, or one ExternalAllow lets out, must stay
//     reachable,
//   - the modes make an external path matter: security allowlist, or full
//     with ask on-miss or always (full with ask off runs whatever the check
//     finds).
//
// Otherwise "" (the command runs as before).
func (p Policy) ConfineWorkspace(a Analysis, outside []string) string {
	if p.Workspace == "" || !a.OK || len(outside) > 0 {
		return ""
	}
	if p.Security == vocab.SecurityFull && p.Ask == vocab.AskOff {
		return ""
	}
	if p.Security != vocab.SecurityFull && p.Security != vocab.SecurityAllowlist {
		return ""
	}
	uses := false
	for _, s := range a.Segments {
		uses = uses || isExternalCommand(s)
	}
	if !uses {
		return ""
	}
	return p.Workspace
}

// isExternalCommand reports whether s runs one of the external-directory
// commands.
func isExternalCommand(s Segment) bool {
	if len(s.Argv) == 0 {
		return false
	}
	name := filepath.Base(s.Argv[0])
	if s.Path != "" {
		name = filepath.Base(s.Path)
	}
	return externalCommands[name] || pathsOf(s) != nil
}

// pathsOf is the path extractor of a program whose options are parsed
// (tar, zip, unzip, wget: gadgetSpec.paths), or nil.
func pathsOf(s Segment) func([]string) []string {
	spec, ok := gadgetSpecFor(segmentNames(s)...)
	if !ok {
		return nil
	}
	return spec.paths
}

// externalCommands are OpenCode's external-directory commands; the
// programs with a gadgetSpec.paths (tar, zip, unzip, wget) are checked too.
var externalCommands = map[string]bool{"cd": true, "rm": true, "cp": true, "mv": true, "mkdir": true, "touch": true, "chmod": true, "chown": true, "cat": true}

// ExternalPaths returns the path arguments of cd rm cp mv mkdir touch chmod
// chown cat segments that resolve outside workspace (workdir.IsOutside:
// symlinks of existing components followed the way the kernel walks them,
// ".." after a symlink included), de-duplicated and sorted, as the kernel
// would see them (joined to the cwd, not cleaned). Every non-option word and
// every option value is treated as a possible path (a mode or owner such as
// 755 or root:root resolves inside the cwd, so only a cwd outside the
// workspace makes it external — which it then is). Relative paths are
// checked against every directory the segment may run in (Segment.Cwds).
// An unresolvable path counts as outside.
func ExternalPaths(a Analysis, workspace string) []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, s := range a.Segments {
		if !isExternalCommand(s) {
			continue
		}
		cands := pathCandidates(s)
		for _, c := range cands {
			if c == "" || c == "-" {
				continue
			}
			var paths []string
			if filepath.IsAbs(c) {
				paths = []string{c}
			} else {
				for _, cwd := range s.Cwds {
					paths = append(paths, strings.TrimSuffix(cwd, "/")+"/"+c)
				}
				if len(paths) == 0 {
					paths = []string{c} // no cwd known: IsOutside fails closed
				}
			}
			for _, p := range paths {
				if out, err := workdir.IsOutside(workspace, p); out || err != nil {
					add(p)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// pathCandidates are the words of s that may name a path: for a program
// whose options are parsed (tar, zip, unzip, wget), what its parser says
// (clusters, glued values, aliases and abbreviations: tar -xvC/dir); for
// the others every non-option word and every option value.
func pathCandidates(s Segment) []string {
	if paths := pathsOf(s); paths != nil {
		return paths(s.Argv[1:])
	}
	var cands []string
	end := false
	for _, arg := range s.Argv[1:] {
		switch {
		case end || arg == "-" || !strings.HasPrefix(arg, "-"):
			cands = append(cands, arg)
		case arg == "--":
			end = true
		case strings.HasPrefix(arg, "--"):
			if _, val, ok := strings.Cut(arg, "="); ok {
				cands = append(cands, val)
			}
		case len(arg) > 2:
			cands = append(cands, arg[2:])
		}
	}
	return cands
}

// RequiresApproval is the approval formula of SECURITY.md, "The guard".
func RequiresApproval(ask vocab.Ask, sec vocab.Security, analysisOK, allowlisted bool) bool {
	return ask == vocab.AskAlways || (ask == vocab.AskOnMiss && sec == vocab.SecurityAllowlist && (!analysisOK || !allowlisted))
}
