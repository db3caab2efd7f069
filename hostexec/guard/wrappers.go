package guard

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandboxctl/sandboxctl/envguard"
)

// defaultExecPath is the search path execvp and `command -p` use when PATH
// is unset (glibc confstr _CS_PATH).
const defaultExecPath = "/bin:/usr/bin"

var (
	errUnknownOption = errors.New("unknown option")
	errAmbiguous     = errors.New("ambiguous option")
)

// resolveLong resolves a GNU long option (without "=value") against the
// program's full option list: an exact match wins, else a unique prefix.
func resolveLong(name string, known []string) (string, error) {
	if slices.Contains(known, name) {
		return name, nil
	}
	var cands []string
	for _, k := range known {
		if strings.HasPrefix(k, name) {
			cands = append(cands, k)
		}
	}
	switch len(cands) {
	case 0:
		return "", fmt.Errorf("%s: %w", name, errUnknownOption)
	case 1:
		return cands[0], nil
	}
	return "", fmt.Errorf("%s (could be %s): %w", name, strings.Join(cands, ", "), errAmbiguous)
}

// exactLong resolves a long option but refuses abbreviations of options we
// accept: the program may know options we do not, so only the full
// spelling means the same to both of us.
func exactLong(name string, known []string) (string, error) {
	full, err := resolveLong(name, known)
	if err != nil {
		return "", err
	}
	if full != name {
		return full, fmt.Errorf("abbreviated long option %s (= %s): spell it out", name, full)
	}
	return full, nil
}

var validEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// classify says what kind of program argv[0] is: "shell", "carrier", a
// wrapper kind ("env", "nohup", ...) or "".
func classify(base, rbase string) (string, string) {
	if rbase == "coreutils" { // single-binary coreutils dispatches on argv[0]
		rbase = base
	}
	for _, b := range []string{rbase, base} {
		if why := refusedCarriers[b]; why != "" {
			return "carrier", why
		}
	}
	if analysedShells[rbase] {
		return "shell", ""
	}
	if analysedWrappers[rbase] {
		return rbase, ""
	}
	if analysedShells[base] || analysedWrappers[base] {
		return "spoof", fmt.Sprintf("%s resolves to %s, not a known %s", base, rbase, base)
	}
	return "", ""
}

// command analyses a literal argv (the top-level command or what a wrapper
// runs) and returns it pinned: executables replaced by absolute paths,
// shell -c strings replaced by their rebuilt form.
func (w *walker) command(seg *Segment, argv []string, pathVar string) ([]string, bool) {
	if len(seg.Wrappers)-len(w.wrappers) > 2*w.an.env.MaxDepth {
		w.an.segFail(seg, RuleDepth, "more than %d nested wrappers", 2*w.an.env.MaxDepth)
		return nil, false
	}
	if len(argv) == 0 || argv[0] == "" {
		w.an.segFail(seg, RuleEmpty, "wrapper without a command")
		return nil, false
	}
	seg.Argv = argv
	name := argv[0]
	if !strings.Contains(name, "/") {
		if why, ok := refusedBuiltins[name]; ok {
			w.an.segFail(seg, RuleBuiltin, "%s: %s", name, why)
			return nil, false
		}
		switch name {
		case "cd":
			return w.cd(seg, argv)
		case "exec", "command":
			return w.builtinWrapper(seg, argv, pathVar)
		}
	}
	if base := filepath.Base(name); strings.Contains(name, "/") && !filepath.IsAbs(name) &&
		(analysedShells[base] || analysedWrappers[base] || refusedCarriers[base] != "") {
		w.an.segFail(seg, RuleWrapperSpoof, "%s run through a relative path (a shell or wrapper must come from the trusted dirs)", name)
		return nil, false
	}
	// A carrier is refused by its name, installed or not: the verdict must
	// not depend on what happens to be on this host's PATH.
	if why := refusedCarriers[filepath.Base(name)]; why != "" {
		w.an.segFail(seg, RuleCarrier, "%s: %s", filepath.Base(name), why)
		return nil, false
	}
	path, resolved, err := w.lookPath(name, pathVar)
	if err != nil {
		if errors.Is(err, errRelativeAfterCd) {
			w.an.segFail(seg, RuleRelativeAfterCd, "%s: relative executable after cd (cannot tell which directory it is in)", name)
		} else {
			w.an.segFail(seg, RuleNotFound, "%v", err)
		}
		return nil, false
	}
	seg.Path, seg.Resolved = path, resolved
	kind, why := classify(filepath.Base(name), filepath.Base(resolved))
	if kind == "" {
		return append([]string{path}, argv[1:]...), true
	}
	switch {
	case kind == "spoof":
		w.an.segFail(seg, RuleWrapperSpoof, "%s", why)
		return nil, false
	case strings.Contains(name, "/") && !filepath.IsAbs(name):
		w.an.segFail(seg, RuleWrapperSpoof, "%s (%s) run through a relative path", name, kind)
		return nil, false
	case !inDirs(path, w.an.env.TrustedDirs) || !inDirs(resolved, w.an.env.TrustedDirs):
		w.an.segFail(seg, RuleWrapperSpoof, "%s resolves to %s, outside the trusted dirs %v", name, resolved, w.an.env.TrustedDirs)
		return nil, false
	case kind == "carrier":
		w.an.segFail(seg, RuleCarrier, "%s: %s", filepath.Base(name), why)
		return nil, false
	case kind == "shell":
		return w.shell(seg, argv, path, resolved, pathVar)
	case kind == "env":
		return w.env(seg, argv, path, resolved, pathVar)
	}
	return w.simpleWrapper(seg, kind, argv, path, resolved, pathVar)
}

func (w *walker) pushWrapper(seg *Segment, kind, path, resolved string, argv []string) {
	seg.Wrappers = append(seg.Wrappers, Wrapper{Kind: kind, Name: argv[0], Path: path, Resolved: resolved, Argv: slices.Clone(argv)})
	seg.Path, seg.Resolved = "", ""
}

// inner analyses the wrapped command and returns pinned = prefix + inner.
func (w *walker) inner(seg *Segment, prefix, rest []string, pathVar string) ([]string, bool) {
	p, ok := w.command(seg, rest, pathVar)
	if !ok {
		return nil, false
	}
	return append(prefix, p...), true
}

func (w *walker) cd(seg *Segment, argv []string) ([]string, bool) {
	i := 1
	opts := []string{}
	for ; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			i++
			break
		}
		if len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "LPe@") == "" {
			opts = append(opts, a)
			continue
		}
		break
	}
	ops := argv[i:]
	if len(ops) != 1 || ops[0] == "" || ops[0] == "-" {
		w.an.segFail(seg, RuleBuiltin, "cd needs exactly one directory (no $HOME, no -)")
		return nil, false
	}
	target := ops[0]
	seg.Builtin = true
	seg.Path, seg.Resolved = "", ""
	w.st.sawCd = true
	for _, c := range slices.Clone(w.st.cwds) {
		n := target
		if !filepath.IsAbs(n) {
			n = filepath.Join(c, n)
		}
		n = filepath.Clean(n)
		if !slices.Contains(w.st.cwds, n) {
			w.st.cwds = append(w.st.cwds, n)
		}
	}
	if !filepath.IsAbs(target) && !strings.HasPrefix(target, "./") && !strings.HasPrefix(target, "../") && target != "." && target != ".." {
		target = "./" + target // never consult CDPATH
	}
	return append(append([]string{"cd"}, opts...), "--", target), true
}

// builtinWrapper handles the exec and command builtins.
func (w *walker) builtinWrapper(seg *Segment, argv []string, pathVar string) ([]string, bool) {
	name := argv[0]
	i := 1
loop:
	for ; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			i++
			break loop
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch {
				case name == "exec" && (c == 'c' || c == 'l'):
				case name == "exec" && c == 'a':
					if j+1 == len(a) {
						i++
					}
					if i >= len(argv) {
						w.an.segFail(seg, RuleWrapperOption, "exec -a needs a name")
						return nil, false
					}
					j = len(a)
				case name == "command" && c == 'p':
					pathVar = defaultExecPath
				default:
					w.an.segFail(seg, RuleWrapperOption, "%s -%c is not accepted", name, c)
					return nil, false
				}
			}
		default:
			break loop
		}
	}
	if i >= len(argv) {
		w.an.segFail(seg, RuleWrapperOption, "%s without a command", name)
		return nil, false
	}
	w.pushWrapper(seg, name, "", "", argv[:i])
	return w.inner(seg, slices.Clone(argv[:i]), argv[i:], pathVar)
}

var shellLongOpts = []string{"--login", "--noprofile", "--norc", "--posix", "--rcfile", "--init-file", "--restricted", "--verbose", "--debugger", "--dump-strings", "--dump-po-strings", "--help", "--version", "--pretty-print", "--noediting", "--wordexp"}

// shell handles sh/bash/dash/zsh/ksh: only `-c STRING [ARG0 [ARGS...]]`
// with harmless options is accepted, and STRING is analysed recursively.
func (w *walker) shell(seg *Segment, argv []string, path, resolved, pathVar string) ([]string, bool) {
	hasC := false
	i := 1
loop:
	for ; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--" || a == "-":
			i++
			break loop
		case strings.HasPrefix(a, "--"):
			opt, err := exactLong(a, shellLongOpts)
			if err != nil {
				w.an.segFail(seg, RuleWrapperOption, "%s: %v", argv[0], err)
				return nil, false
			}
			switch opt {
			case "--login", "--noprofile", "--norc", "--posix":
			default:
				w.an.segFail(seg, RuleWrapperOption, "%s %s is not accepted", argv[0], opt)
				return nil, false
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch {
				case c == 'c' && a[0] == '-':
					hasC = true
				case strings.IndexByte("leuxvfnaCEBPh", c) >= 0:
				case c == 'o':
					i++
					if i >= len(argv) || !slices.Contains([]string{"pipefail", "errexit", "nounset", "xtrace", "verbose", "noglob", "noclobber", "noexec"}, argv[i]) {
						w.an.segFail(seg, RuleWrapperOption, "%s -o: only pipefail errexit nounset xtrace verbose noglob noclobber noexec", argv[0])
						return nil, false
					}
				default:
					w.an.segFail(seg, RuleWrapperOption, "%s %c%c is not accepted (interactive, stdin, shopt or restricted options)", argv[0], a[0], c)
					return nil, false
				}
			}
		default:
			break loop
		}
	}
	if !hasC {
		w.an.segFail(seg, RuleShellNoCommand, "%s without -c runs a script file or stdin, which cannot be analysed", argv[0])
		return nil, false
	}
	if i >= len(argv) {
		w.an.segFail(seg, RuleShellNoCommand, "%s -c without a command string", argv[0])
		return nil, false
	}
	if w.depth+1 > w.an.env.MaxDepth {
		w.an.segFail(seg, RuleDepth, "shells nested deeper than %d", w.an.env.MaxDepth)
		return nil, false
	}
	w.pushWrapper(seg, "shell", path, resolved, argv[:i])
	before := len(w.an.segs)
	rebuilt, ok := w.an.script(argv[i], seg, w.depth+1, seg.Wrappers, w.st, pathVar)
	if len(w.an.segs) > before && seg.Rule == "" {
		// The -c string produced segments: they replace the shell's own.
		w.an.removed[seg] = true
	}
	if !ok {
		return nil, false
	}
	out := append([]string{path}, argv[1:i]...)
	out = append(out, rebuilt)
	return append(out, argv[i+1:]...), true
}

var envLongOpts = []string{"--ignore-environment", "--null", "--unset", "--chdir", "--split-string", "--debug", "--argv0", "--block-signal", "--default-signal", "--ignore-signal", "--list-signal-handling", "--help", "--version"}

const maxSplits = 4

// env handles env [-i] [-0] [-v] [-u NAME] [-S STRING] [NAME=VALUE]... [CMD ARGS...].
// -S strings are split here (they must be plain words) and spliced back in,
// as env itself does.
func (w *walker) env(seg *Segment, argv []string, path, resolved, pathVar string) ([]string, bool) {
	args := slices.Clone(argv[1:])
	var clear bool
	var unset []string
	splits := 0
	split := func(s string, i int) bool {
		splits++
		if splits > maxSplits {
			w.an.segFail(seg, RuleDepth, "env -S used more than %d times", maxSplits)
			return false
		}
		words, err := splitString(s)
		if err != nil {
			w.an.segFail(seg, RuleWrapperOption, "env -S %q: %v", s, err)
			return false
		}
		args = append(words, args[i:]...)
		return true
	}
	i := 0
opts:
	for i < len(args) {
		a := args[i]
		switch {
		case a == "-":
			clear = true
			i++
		case a == "--":
			i++
			break opts
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			opt, err := exactLong(name, envLongOpts)
			if err != nil {
				w.an.segFail(seg, RuleWrapperOption, "env: %v", err)
				return nil, false
			}
			i++
			needVal := func() (string, bool) {
				if hasVal {
					return val, true
				}
				if i >= len(args) {
					w.an.segFail(seg, RuleWrapperOption, "env %s needs a value", opt)
					return "", false
				}
				i++
				return args[i-1], true
			}
			switch opt {
			case "--ignore-environment":
				clear = true
			case "--null", "--debug":
			case "--unset":
				v, ok := needVal()
				if !ok {
					return nil, false
				}
				unset = append(unset, v)
			case "--split-string":
				v, ok := needVal()
				if !ok || !split(v, i) {
					return nil, false
				}
				i = 0
			default:
				w.an.segFail(seg, RuleWrapperOption, "env %s is not accepted", opt)
				return nil, false
			}
		case len(a) > 1 && a[0] == '-':
			i++
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch c {
				case 'i':
					clear = true
				case '0', 'v':
				case 'u', 'S':
					var v string
					if j+1 < len(a) {
						v = a[j+1:]
					} else if i < len(args) {
						v = args[i]
						i++
					} else {
						w.an.segFail(seg, RuleWrapperOption, "env -%c needs a value", c)
						return nil, false
					}
					if c == 'u' {
						unset = append(unset, v)
					} else {
						if !split(v, i) {
							return nil, false
						}
						i = 0
					}
					j = len(a)
				default:
					w.an.segFail(seg, RuleWrapperOption, "env -%c is not accepted (only -i -0 -v -u -S)", c)
					return nil, false
				}
			}
		default:
			break opts
		}
	}
	assign := map[string]string{}
	var order []string
	for ; i < len(args); i++ {
		// env treats every word with '=' before the command as an
		// assignment, whatever the name (BASH_FUNC_x%%=...); EnvCheck
		// refuses invalid names.
		k, v, ok := strings.Cut(args[i], "=")
		if !ok {
			break
		}
		if _, dup := assign[k]; !dup {
			order = append(order, k)
		}
		assign[k] = v
	}
	if len(assign) > 0 {
		if err := w.an.env.EnvCheck(assign); err != nil {
			w.an.segFail(seg, RuleEnvBlocked, "env: %v", err)
			return nil, false
		}
	}
	for _, u := range unset {
		if envguard.IsPinned(u) {
			w.an.segFail(seg, RuleEnvBlocked, "env: -u %s: a pinned variable of the host (%s) may not be unset", u, ErrEnvBlocked)
			return nil, false
		}
	}
	if len(assign) > 0 && seg.Env == nil {
		seg.Env = map[string]string{}
	}
	for k, v := range assign {
		seg.Env[k] = v
	}
	if clear || slices.Contains(unset, "PATH") {
		pathVar = defaultExecPath
		seg.ClearEnv = seg.ClearEnv || clear
	}
	pinned := []string{path}
	if clear {
		// env -i drops the host's pinned variables too (LESSSECURE=1):
		// the rebuilt line sets them again right after -i.
		pinned = append(pinned, "-i")
		hostPinned := envguard.Pinned()
		for _, k := range slices.Sorted(maps.Keys(hostPinned)) {
			pinned = append(pinned, k+"="+hostPinned[k])
		}
	}
	for _, u := range unset {
		pinned = append(pinned, "-u", u)
	}
	for _, k := range order {
		pinned = append(pinned, k+"="+assign[k])
	}
	if i >= len(args) {
		// env with no command prints the environment: env itself runs.
		seg.Path, seg.Resolved = path, resolved
		return pinned, true
	}
	w.pushWrapper(seg, "env", path, resolved, append([]string{argv[0]}, args[:i]...))
	return w.inner(seg, pinned, args[i:], pathVar)
}

// oneCall parses s as exactly one simple command: no operators,
// redirections, negation or background; the caller judges its words.
func oneCall(s string) (*syntax.CallExpr, error) {
	if rule, msg := lexical(s); rule != "" {
		return nil, fmt.Errorf("%s: %s", rule, msg)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s), "")
	if err != nil {
		return nil, err
	}
	if len(f.Stmts) != 1 {
		return nil, errors.New("must be one plain list of words")
	}
	st := f.Stmts[0]
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 {
		return nil, errors.New("must be one plain list of words (no operators or redirections)")
	}
	return c, nil
}

// splitString splits an env -S string. Only plain words are accepted: no
// backslashes, $ or # (env's own escapes, ${VAR} and comments), and nothing
// the shell would read as an operator or redirection.
func splitString(s string) ([]string, error) {
	if strings.ContainsAny(s, "\\$#`") {
		return nil, errors.New(`contains \ $ # or ` + "`")
	}
	c, err := oneCall(s)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, as := range c.Assigns {
		if as.Append || as.Naked || as.Index != nil || as.Array != nil || as.Value == nil && as.Name == nil {
			return nil, errors.New("unsupported assignment form")
		}
		v := ""
		if as.Value != nil {
			var rule Rule
			var msg string
			v, rule, msg = word(as.Value)
			if rule != "" {
				return nil, fmt.Errorf("%s: %s", rule, msg)
			}
		}
		out = append(out, as.Name.Value+"="+v)
	}
	for _, a := range c.Args {
		v, rule, msg := word(a)
		if rule != "" {
			return nil, fmt.Errorf("%s: %s", rule, msg)
		}
		out = append(out, v)
	}
	return out, nil
}

var (
	timeoutLongOpts = []string{"--foreground", "--kill-after", "--preserve-status", "--signal", "--verbose", "--help", "--version"}
	niceLongOpts    = []string{"--adjustment", "--help", "--version"}
	stdbufLongOpts  = []string{"--input", "--output", "--error", "--help", "--version"}
	sudoLongOpts    = []string{"--non-interactive", "--preserve-env", "--set-home", "--user", "--group", "--prompt", "--close-from", "--command-timeout", "--stdin", "--preserve-groups", "--reset-timestamp", "--askpass", "--background", "--chdir", "--chroot", "--edit", "--help", "--host", "--list", "--login", "--remove-timestamp", "--role", "--shell", "--type", "--validate", "--version", "--other-user", "--bell", "--"}
	numericNice     = regexp.MustCompile(`^-[-+]?[0-9]+$`)
)

// simpleWrapper handles nohup, timeout, nice, stdbuf and sudo: options are
// skipped (known ones only) and the wrapped command analysed.
func (w *walker) simpleWrapper(seg *Segment, kind string, argv []string, path, resolved, pathVar string) ([]string, bool) {
	args := argv[1:]
	fail := func(format string, a ...any) ([]string, bool) {
		w.an.segFail(seg, RuleWrapperOption, kind+": "+format, a...)
		return nil, false
	}
	// shortVal: short options taking a value; shortBool: flags; long: option -> takes value.
	var shortVal, shortBool string
	var long map[string]bool
	var known []string
	positional := 0 // fixed positionals before the command (timeout DURATION)
	cmdOptional := false
	var assign map[string]string
	switch kind {
	case "nohup":
		known = []string{"--help", "--version"}
		long = map[string]bool{}
	case "timeout":
		shortVal, shortBool, known = "ks", "fpv", timeoutLongOpts
		long = map[string]bool{"--foreground": false, "--kill-after": true, "--preserve-status": false, "--signal": true, "--verbose": false}
		positional = 1
	case "nice":
		shortVal, known = "n", niceLongOpts
		long = map[string]bool{"--adjustment": true}
		cmdOptional = true
	case "stdbuf":
		shortVal, known = "ioe", stdbufLongOpts
		long = map[string]bool{"--input": true, "--output": true, "--error": true}
	case "sudo":
		shortVal, shortBool, known = "ugpCT", "nEHPSk", sudoLongOpts
		long = map[string]bool{"--non-interactive": false, "--preserve-env": false, "--set-home": false, "--user": true, "--group": true, "--prompt": true, "--close-from": true, "--command-timeout": true, "--stdin": false, "--preserve-groups": false, "--reset-timestamp": false}
		assign = map[string]string{}
	default:
		return fail("unknown wrapper")
	}
	i := 0
opts:
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			i++
			break opts
		case kind == "nice" && numericNice.MatchString(a):
			i++
		case strings.HasPrefix(a, "--"):
			name, _, hasVal := strings.Cut(a, "=")
			opt, err := exactLong(name, known)
			if err != nil {
				return fail("%v", err)
			}
			takes, ok := long[opt]
			if !ok {
				return fail("%s is not accepted", opt)
			}
			i++
			if takes && !hasVal {
				if i >= len(args) {
					return fail("%s needs a value", opt)
				}
				i++
			}
			if !takes && hasVal && !(kind == "sudo" && opt == "--preserve-env") {
				return fail("%s takes no value", opt)
			}
		case len(a) > 1 && a[0] == '-':
			i++
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch {
				case strings.IndexByte(shortBool, c) >= 0:
				case strings.IndexByte(shortVal, c) >= 0:
					if j+1 == len(a) {
						if i >= len(args) {
							return fail("-%c needs a value", c)
						}
						i++
					}
					j = len(a)
				default:
					return fail("-%c is not accepted", c)
				}
			}
		default:
			break opts
		}
	}
	for ; positional > 0; positional-- {
		if i >= len(args) {
			return fail("missing operand")
		}
		i++
	}
	if assign != nil {
		for ; i < len(args); i++ {
			k, v, ok := strings.Cut(args[i], "=")
			if !ok {
				break
			}
			assign[k] = v
		}
		if len(assign) > 0 {
			if err := w.an.env.EnvCheck(assign); err != nil {
				w.an.segFail(seg, RuleEnvBlocked, "sudo: %v", err)
				return nil, false
			}
			if seg.Env == nil {
				seg.Env = map[string]string{}
			}
			for k, v := range assign {
				seg.Env[k] = v
			}
		}
	}
	if i >= len(args) {
		if cmdOptional {
			seg.Path, seg.Resolved = path, resolved
			return append([]string{path}, args...), true
		}
		return fail("no command to run")
	}
	w.pushWrapper(seg, kind, path, resolved, argv[:i+1])
	return w.inner(seg, append([]string{path}, args[:i]...), args[i:], pathVar)
}
