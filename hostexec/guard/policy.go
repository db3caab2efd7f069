package guard

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxctl/sandboxctl/workdir"
)

// Decision is what the guard decided for a command.
type Decision string

// Decisions of Evaluate.
const (
	DecisionRun           Decision = "run"
	DecisionDeny          Decision = "deny"
	DecisionNeedsApproval Decision = "needs-approval"
)

// Policy is the guard configuration of one host for one request, after
// EffectiveModes has combined configuration and request.
type Policy struct {
	Security    Security
	Ask         Ask
	AskFallback Security // deny (default when empty), allowlist, full
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
	Decision Decision
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
}

// Evaluate decides whether an analysed command may run (SPEC §5):
//
//   - security deny → Deny.
//   - security full → Run, unless ask is always (or ask is on-miss and a
//     path argument is external) → NeedsApproval.
//   - security allowlist → requiresApproval = ask==always || (ask==on-miss
//     && (!analysisOk || !satisfied)) → NeedsApproval; else Run when
//     satisfied; else Deny.
//
// Invalid modes deny (fail closed).
func (p Policy) Evaluate(a Analysis) Verdict {
	v := Verdict{Command: a.Command}
	if a.OK {
		v.Command = a.Rebuilt
	}
	if !p.Security.Valid() {
		v.Decision, v.Reason = DecisionDeny, fmt.Sprintf("invalid security mode %q", p.Security)
		return v
	}
	if !p.Ask.Valid() {
		v.Decision, v.Reason = DecisionDeny, fmt.Sprintf("invalid ask mode %q", p.Ask)
		return v
	}
	if p.Security == SecurityDeny {
		v.Decision, v.Reason = DecisionDeny, "security is deny: every command is refused"
		return v
	}
	sat, why := p.satisfy(a, &v)
	v.Satisfied = sat
	switch p.Security {
	case SecurityFull:
		switch {
		case p.Ask == AskAlways:
			v.RequiresApproval = true
			v.Decision, v.Reason = DecisionNeedsApproval, "ask is always"
		case p.Ask == AskOnMiss && len(v.External) > 0:
			v.RequiresApproval = true
			v.Decision, v.Reason = DecisionNeedsApproval, "path outside the workspace: "+strings.Join(v.External, ", ")
		default:
			v.Decision, v.Reason = DecisionRun, "security is full"
		}
	case SecurityAllowlist:
		v.RequiresApproval = RequiresApproval(p.Ask, p.Security, a.OK, sat)
		switch {
		case v.RequiresApproval && p.Ask == AskAlways:
			v.Decision, v.Reason = DecisionNeedsApproval, "ask is always"
		case v.RequiresApproval:
			v.Decision, v.Reason = DecisionNeedsApproval, why
		case sat:
			v.Decision, v.Reason = DecisionRun, "allowlist satisfied"
		default:
			v.Decision, v.Reason = DecisionDeny, why+" (ask is off)"
		}
	}
	return v
}

// Fallback is the verdict when an approval request expired undecided:
// askFallback deny (default) denies, allowlist runs only when satisfied,
// full runs.
func (p Policy) Fallback(a Analysis) Verdict {
	q := p
	q.Ask = AskOff
	switch p.AskFallback {
	case SecurityFull:
		q.Security = SecurityFull
		v := q.Evaluate(a)
		v.Reason = "approval expired; askFallback full: " + v.Reason
		return v
	case SecurityAllowlist:
		q.Security = SecurityAllowlist
		v := q.Evaluate(a)
		v.Reason = "approval expired; askFallback allowlist: " + v.Reason
		return v
	case SecurityDeny, "":
		v := Verdict{Decision: DecisionDeny, Reason: "approval expired; askFallback deny", Command: a.Command}
		return v
	}
	return Verdict{Decision: DecisionDeny, Reason: fmt.Sprintf("approval expired; invalid askFallback %q", p.AskFallback), Command: a.Command}
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
		default:
			if e, ok := p.match(s); ok {
				sv.Satisfied, sv.By = true, "allowlist "+e.Pattern
				v.Hits = append(v.Hits, Hit{EntryID: e.ID, Pattern: e.Pattern, Segment: s.Index, ResolvedPath: s.Resolved})
			} else if ok, why := p.safeBin(s); ok {
				sv.Satisfied, sv.By = true, "safe bin"
			} else {
				sv.Reason = fmt.Sprintf("%s is not allowlisted (%s)", s.Resolved, why)
				if a.OK {
					reasons = append(reasons, fmt.Sprintf("segment %d `%s`: %s", s.Index, s.Raw, sv.Reason))
				}
			}
		}
		v.Segments = append(v.Segments, sv)
	}
	if p.Workspace != "" {
		for _, e := range ExternalPaths(a, p.Workspace) {
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
		if _, ok := p.match(Segment{Path: w.Path, Resolved: w.Resolved}); !ok {
			return fmt.Sprintf("privilege change through %s: sudo itself is not allowlisted", w.Resolved)
		}
	}
	return ""
}

func (p Policy) match(s Segment) (Entry, bool) {
	for _, e := range p.Allowlist {
		if ok, err := MatchPattern(e.Pattern, s.Path, s.Resolved); err == nil && ok {
			return e, true
		}
	}
	return Entry{}, false
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

// externalCommands are OpenCode's external-directory commands.
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
		if len(s.Argv) == 0 {
			continue
		}
		name := filepath.Base(s.Argv[0])
		if s.Path != "" {
			name = filepath.Base(s.Path)
		}
		if !externalCommands[name] {
			continue
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
