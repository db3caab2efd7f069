package guard

import (
	"strings"
)

// Gadgets: allowing a binary must not allow every command its arguments can
// smuggle in (issue 12, item 5). This file is the one table of the options
// and words that make an otherwise harmless program run a command, load
// code, or write a file it names — "gadgets". Policy uses it three ways:
//
//   - an argv that carries a gadget of its program never satisfies an
//     allowlist entry (path, bare name or argv pattern), so it asks (ask
//     on-miss) or is denied (ask off);
//   - for a program listed here, allow-always persists an argv pattern
//     (`/usr/bin/git status`: the resolved path plus the exact arguments),
//     never the bare path, and never an argv that carries a gadget;
//   - programs whose every use runs code (interpreters, editors and other
//     programs that read commands from their input, build tools that run
//     the project's recipes) and pagers/editors run in a PTY (where shell
//     escapes are typed) never satisfy an entry at all.
//
// Sources, per program: the program's own manual (git(1) OPTIONS and
// git-config(1): core.fsmonitor, core.pager, core.sshCommand, alias.*;
// git-rebase(1) --exec, git-bisect(1) run, git-submodule(1) foreach,
// git-fetch(1)/git-clone(1)/git-ls-remote(1)/git-push(1) --upload-pack and
// --receive-pack, git-archive(1) --exec, git-clone(1) --template and
// --config, git-grep(1) --open-files-in-pager, git-difftool(1) --extcmd,
// git-send-email(1) --sendmail-cmd/--to-cmd/--cc-cmd; find(1) ACTIONS; GNU
// sed info "Extended Commands" (e, s///e, w, W) and --sandbox; GNU tar info
// "checkpoints", "--to-command", "--use-compress-program", "remote tape
// server"; sort(1) --compress-program; vim(1) -c --cmd -S +; less(1)
// OPTIONS (+cmd, -o/-O log files, -k lesskey) and "SECURITY"; man(1) -P -H
// -C -X; zip(1) -TT/--unzip-command; rsync(1) -e/--rsh, --rsync-path;
// scp(1) -S, -o, -F; split(1) --filter; diff3(1)/sdiff(1) --diff-program;
// nc/ncat(1) -e -c --sh-exec --lua-exec; socat(1) EXEC:/SYSTEM:;
// tcpdump(8) -z; wget(1) --use-askpass; apt-get(8) -o/-c (APT hooks such
// as APT::Update::Pre-Invoke); gcc(1) -wrapper, -fplugin, -B, -specs and
// @file; ldd(1) Security; openssl(1) -engine/-provider/-config;
// systemctl(1) edit) and GTFOBins (gtfobins.github.io), which catalogues the same
// class for privilege escalation.

// gadgetSpec describes one program. Options are matched as the program's
// own parser would see them: long options by GNU unique-prefix rules (a
// prefix of a gadget option counts as the gadget), short options anywhere
// in a cluster up to the first letter that takes a value. valueShort must
// list only letters that really take a value: a letter listed wrongly would
// hide the next word from the scan (a missing one only makes the scan see a
// value as options, which errs on the side of a miss).
type gadgetSpec struct {
	// always, when set, makes every argv a gadget: the program's input or
	// arguments are code by design.
	always string
	// pty, when set, makes every argv run with a PTY a gadget: the program
	// takes interactive shell escapes.
	pty string
	// long maps gadget long options (with their dashes) to why.
	long map[string]string
	// short maps gadget short option letters to why.
	short map[byte]string
	// valueShort lists short letters that take a value (the rest of the
	// cluster or the next word is then not options).
	valueShort string
	// words maps gadget words (find primaries, `+cmd` forms) to why; a
	// key ending in "*" matches any word with that prefix.
	words map[string]string
	// check, when set, replaces the generic scan (optModel.gadget for the
	// programs whose options are parsed: options.go).
	check func(args []string) (string, string)
	// paths, when set, returns the words of args that name files the
	// program writes or reads (optModel.paths): the external-directory
	// check resolves them as it does the arguments of cp.
	paths func(args []string) []string
	// cwdConfig, when set, says the program reads configuration that runs
	// commands from its working directory: it is a gadget wherever a
	// sandbox (or another user) can write that directory.
	cwdConfig string
}

const (
	whyInterpreter = "interpreter: its program text, script file or input is code"
	whyInteractive = "reads commands from its input, including shell escapes"
	whyProject     = "runs the recipes or scripts of the project it is run in"
	whyPager       = "interactive pager: shell escapes (!cmd, |, v) can be typed into it in a PTY"
	whyEditor      = "editor: runs Ex commands and shell escapes (:!cmd) from its arguments and input"
)

var gadgetTable = func() map[string]gadgetSpec {
	t := map[string]gadgetSpec{}
	for _, n := range []string{"vi", "vim", "vim.basic", "vim.tiny", "nvim", "view", "ex", "rvim", "rview", "vimdiff", "gvim", "evim", "ed", "red", "emacs", "nano", "pico", "joe", "jed", "mcedit", "visudo", "vipw", "vigr", "sudoedit", "editor", "sensible-editor"} {
		t[n] = gadgetSpec{always: whyEditor}
	}
	for _, n := range []string{"gdb", "lldb", "ftp", "sftp", "telnet", "mail", "mailx", "dc", "sqlite3", "mysql", "psql", "m4", "tmux", "screen", "crontab", "at", "batch", "socat"} {
		t[n] = gadgetSpec{always: whyInteractive}
	}
	// ldd(1) "Security": ldd may run the program it inspects.
	t["ldd"] = gadgetSpec{always: "may run the program it inspects (ldd(1) Security)"}
	t["openssl"] = gadgetSpec{words: map[string]string{
		"-engine": "loads the engine (shared object) it names", "-provider": "loads the provider it names",
		"-provider-path": "loads providers from the directory it names", "-config": "reads a config that loads engines and providers",
	}}
	t["systemctl"] = gadgetSpec{words: map[string]string{"edit": "runs an editor"}}
	for _, n := range []string{"java", "jshell", "irb", "pry", "erl", "escript", "elixir", "iex", "guile", "racket", "sbcl", "clisp", "ghci", "runghc", "swift", "kotlin", "scala", "groovy", "R", "octave"} {
		t[n] = gadgetSpec{always: whyInterpreter}
	}
	for _, n := range []string{"make", "gmake", "ninja", "cmake", "meson", "scons", "bazel", "just", "task", "npm", "npx", "yarn", "pnpm",
		"cargo", "go", "mvn", "gradle", "rake", "bundle", "composer", "pytest", "tox", "nox", "invoke", "pip", "pip3", "poetry", "uv", "hatch", "pdm",
		"terraform", "tofu", "packer", "vagrant", "ansible", "ansible-playbook"} {
		t[n] = gadgetSpec{always: whyProject}
	}
	pager := gadgetSpec{pty: whyPager, valueShort: "bhjkoOpPtTxyz#", short: map[byte]string{
		'o': "writes a log file", 'O': "writes a log file", 'k': "reads a lesskey file (key bindings, environment)",
	}, long: map[string]string{
		"--log-file": "writes a log file", "--LOG-FILE": "writes a log file", "--lesskey-file": "reads a lesskey file",
		"--lesskey-src": "reads a lesskey file", "--lesskey-content": "reads lesskey bindings",
	}, words: map[string]string{"+*": "initial command (+!cmd runs a shell command)"}}
	t["less"] = pager
	// more, most and pg: their argv can only move and search (+/pattern,
	// +line); interactive, they take ! escapes.
	for _, n := range []string{"more", "most", "pg"} {
		t[n] = gadgetSpec{pty: whyPager, words: map[string]string{"+*": "initial command"}}
	}
	t["man"] = gadgetSpec{pty: "runs a pager in a PTY: shell escapes can be typed into it", valueShort: "CeELmMpPrRsS", short: map[byte]string{
		'P': "runs the pager command it names", 'H': "runs the browser it names", 'C': "reads a man_db config (DEFINE pager ...)",
		'X': "runs gxditview",
	}, long: map[string]string{
		"--pager": "runs the pager command it names", "--html": "runs the browser it names",
		"--config-file": "reads a man_db config (DEFINE pager ...)", "--gxditview": "runs gxditview",
	}}
	t["git"] = gadgetSpec{check: gitGadget, cwdConfig: "git reads the repository's config, hooks and attributes (core.fsmonitor, filters, hooks run commands) from"}
	t["find"] = gadgetSpec{words: map[string]string{
		"-exec": "runs a command", "-execdir": "runs a command", "-ok": "runs a command", "-okdir": "runs a command",
		"-fprint": "writes a file", "-fprint0": "writes a file", "-fprintf": "writes a file", "-fls": "writes a file",
		"-delete": "deletes files",
	}}
	t["sed"] = gadgetSpec{check: sedGadget}
	t["tar"] = gadgetSpec{check: tarGadget, paths: tarPaths}
	t["unzip"] = gadgetSpec{check: unzipModel.gadget, paths: unzipPaths}
	t["rg"] = gadgetSpec{check: rgModel.gadget}
	t["curl"] = gadgetSpec{check: curlModel.gadget, paths: curlPaths}
	t["sort"] = gadgetSpec{valueShort: "koStT", short: map[byte]string{'o': "writes the file it names"}, long: map[string]string{
		"--compress-program": "runs the program it names", "--output": "writes the file it names",
	}}
	t["zip"] = gadgetSpec{check: zipGadget, paths: zipPaths}
	t["rsync"] = gadgetSpec{valueShort: "eBfTM", short: map[byte]string{'e': "runs the remote shell it names"}, long: map[string]string{
		"--rsh": "runs the remote shell it names", "--rsync-path": "runs the remote program it names",
		"--log-file": "writes a log file", "--daemon": "runs a daemon", "--config": "reads a daemon config (pre-xfer exec)",
		"--write-batch": "writes a batch file", "--only-write-batch": "writes a batch file",
	}}
	t["scp"] = gadgetSpec{valueShort: "cFiJloPSDX", short: map[byte]string{'S': "runs the program it names", 'o': "ssh options (ProxyCommand)", 'F': "reads an ssh config (ProxyCommand)", 'J': "jump host (runs ssh)"}}
	t["split"] = gadgetSpec{long: map[string]string{"--filter": "runs a shell command per chunk"}}
	t["diff3"] = gadgetSpec{long: map[string]string{"--diff-program": "runs the program it names"}}
	t["sdiff"] = gadgetSpec{long: map[string]string{"--diff-program": "runs the program it names"}}
	nc := gadgetSpec{valueShort: "ceIiOopqsTwX", short: map[byte]string{'e': "runs the program it names", 'c': "runs a shell command"}, long: map[string]string{
		"--exec": "runs the program it names", "--sh-exec": "runs a shell command", "--lua-exec": "runs a Lua script",
	}}
	for _, n := range []string{"nc", "ncat", "netcat", "nc.traditional", "nc.openbsd"} {
		t[n] = nc
	}
	t["tcpdump"] = gadgetSpec{valueShort: "BcCEFGiMmrsTVwWyzZ", short: map[byte]string{'z': "runs the post-rotate command it names", 'w': "writes a capture file"}}
	t["wget"] = gadgetSpec{check: wgetModel.gadget, paths: wgetPaths}
	apt := gadgetSpec{valueShort: "cot", short: map[byte]string{'o': "sets APT options (Pre-Invoke hooks run commands)", 'c': "reads an APT config (hooks run commands)"}, long: map[string]string{
		"--option": "sets APT options (Pre-Invoke hooks run commands)", "--config-file": "reads an APT config (hooks run commands)",
	}}
	t["apt"], t["apt-get"] = apt, apt
	cc := gadgetSpec{check: compilerGadget}
	for _, n := range []string{"cc", "gcc", "g++", "c++", "clang", "clang++"} {
		t[n] = cc
	}
	return t
}()

// gadgetSpecFor returns the table entry of a program by the base name it
// runs as (name as written or found on PATH, or its symlink-free target).
func gadgetSpecFor(names ...string) (gadgetSpec, bool) {
	for _, n := range names {
		if n == "" {
			continue
		}
		if isInterpreter(n) {
			return gadgetSpec{always: whyInterpreter}, true
		}
		if s, ok := gadgetTable[n]; ok {
			return s, true
		}
		// versioned names: gcc-12, python3.11 (interpreters above), vim.basic
		if i := strings.IndexAny(n, "-."); i > 0 {
			if s, ok := gadgetTable[n[:i]]; ok {
				return s, true
			}
		}
	}
	return gadgetSpec{}, false
}

// ArgvMatched reports whether a program (base name) is matched by argv:
// allow-always persists an argv pattern for it, not its path.
func ArgvMatched(names ...string) bool {
	s, ok := gadgetSpecFor(names...)
	return ok && s.always == ""
}

// Gadget returns the first argument of argv (argv[0] is the program) that
// makes the program run a command, load code or write a file it names, and
// why; ("", "") when there is none. names are the program's base names (as
// run and as resolved). pty says whether it runs with a terminal.
func Gadget(argv []string, pty bool, names ...string) (string, string) {
	s, ok := gadgetSpecFor(names...)
	if !ok {
		return "", ""
	}
	first := ""
	if len(argv) > 0 {
		first = argv[0]
	}
	switch {
	case s.always != "":
		return first, s.always
	case pty && s.pty != "":
		return first + " (pty)", s.pty
	}
	if len(argv) < 2 {
		return "", ""
	}
	if s.check != nil {
		return s.check(argv[1:])
	}
	return scanOptions(s, argv[1:])
}

// scanOptions is the generic scan: words, GNU long options (prefixes
// count), short clusters.
func scanOptions(s gadgetSpec, args []string) (string, string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if why := matchWord(s.words, a); why != "" {
			return a, why
		}
		switch {
		case a == "--":
			// Options end; operands are not options (but some programs,
			// like find, have no "--" semantics for their words: handled
			// by words above for every argument).
			for _, b := range args[i+1:] {
				if why := matchWord(s.words, b); why != "" {
					return b, why
				}
			}
			return "", ""
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a, "=")
			if why := matchLong(s.long, name); why != "" {
				return a, why
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				if why, ok := s.short[c]; ok {
					return a, why
				}
				if strings.IndexByte(s.valueShort, c) >= 0 {
					if j+1 == len(a) {
						i++ // the value is the next word
					}
					break
				}
			}
		}
	}
	return "", ""
}

func matchWord(words map[string]string, a string) string {
	if why, ok := words[a]; ok {
		return why
	}
	for w, why := range words {
		if p, ok := strings.CutSuffix(w, "*"); ok && strings.HasPrefix(a, p) {
			return why
		}
	}
	return ""
}

// matchLong: name (with dashes, without =value) is a gadget option or a
// GNU abbreviation of one (at least "--" and one character: GNU sort reads
// --o as --output). A prefix shared with a harmless option is ambiguous to
// getopt, which then refuses it: counting it costs nothing.
func matchLong(long map[string]string, name string) string {
	if why, ok := long[name]; ok {
		return why
	}
	if len(name) < 3 {
		return ""
	}
	for opt, why := range long {
		if strings.HasPrefix(opt, name) {
			return why
		}
	}
	return ""
}

// gitGlobal are git's global options (before the subcommand) that change
// which configuration, repository or programs git uses; -p pages through
// core.pager.
var gitGlobal = map[string]string{
	"-c": "sets configuration (core.fsmonitor, core.pager, alias.* run commands)", "--config-env": "sets configuration from the environment",
	"--exec-path": "runs git subcommands from the directory it names", "-C": "runs in another repository (its config runs commands)",
	"--git-dir": "uses another repository (its config runs commands)", "--work-tree": "uses another work tree",
	"--namespace": "uses another namespace", "-p": "pages output through core.pager", "--paginate": "pages output through core.pager",
	"--super-prefix": "internal option", "--list-cmds": "lists commands",
}

// gitSubcommand: subcommands that run commands whatever their options, and
// subcommand options that run commands or templates.
var (
	gitAlwaysSub = map[string]string{
		"bisect": "bisect run runs a command", "submodule": "submodule foreach runs a command; update runs update commands",
		"filter-branch": "runs filter commands", "difftool": "runs diff tools", "mergetool": "runs merge tools",
		"instaweb": "runs a web server and browser", "send-email": "runs sendmail and command hooks", "daemon": "serves repositories",
		"config": "writes configuration that runs commands", "hook": "runs hooks", "credential": "runs credential helpers",
		"web--browse": "runs a browser", "help": "runs man, info or a browser", "svn": "runs svn", "p4": "runs p4",
		"filter-repo": "runs filter callbacks", "sh-setup": "shell library", "run": "runs commands",
	}
	gitSubOpts = map[string]string{
		"--exec": "runs the command it names", "--upload-pack": "runs the remote program it names",
		"--receive-pack": "runs the remote program it names",
		"--template":     "copies hooks from the directory it names", "--config": "sets configuration (runs commands)",
		"--open-files-in-pager": "runs the pager it names", "--ext-diff": "runs the external diff driver",
		"--extcmd": "runs the command it names", "--textconv": "runs textconv filters", "--sendmail-cmd": "runs the command it names",
		"--to-cmd": "runs the command it names", "--cc-cmd": "runs the command it names", "--remote": "talks to a remote (runs ssh)",
		"--output": "writes the file it names", "--output-directory": "writes files into the directory it names",
	}
)

// gitSubShort: per subcommand, the short letters that are an alias of a
// gadget long option (archive -o is --output). git's parse-options accepts
// clusters (-vo FILE) and glued values (-oFILE), so the letter counts
// anywhere in a single-dash word: a wrong hit only asks.
var gitSubShort = map[string]map[byte]string{
	"rebase": {'x': "--exec"}, "fetch": {'u': "--upload-pack"}, "pull": {'u': "--upload-pack"},
	"clone": {'u': "--upload-pack", 'c': "--config"}, "ls-remote": {'u': "--upload-pack"}, "grep": {'O': "--open-files-in-pager"},
	"archive": {'o': "--output"}, "format-patch": {'o': "--output-directory"}, "submodule": {'c': "--config"},
}

func gitGadget(args []string) (string, string) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, _, hasVal := strings.Cut(a, "=")
		if strings.HasPrefix(a, "-c") || strings.HasPrefix(a, "-C") {
			return a, gitGlobal[a[:2]]
		}
		if why := matchLong(gitGlobal, name); why != "" {
			if name == "--exec-path" && !hasVal {
				continue // prints the exec path
			}
			return a, why
		}
		if name == "--attr-source" && !hasVal {
			i++ // the one other global option with a separate value
		}
	}
	if i >= len(args) {
		return "", ""
	}
	sub := args[i]
	if why, ok := gitAlwaysSub[sub]; ok {
		return sub, why
	}
	for _, a := range args[i+1:] {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(a, "=")
		if why, ok := gitSubOpts[name]; ok && strings.HasPrefix(name, "--") {
			return a, why
		}
		if strings.HasPrefix(name, "--") && len(name) >= 3 {
			for opt, why := range gitSubOpts {
				if strings.HasPrefix(opt, "--") && strings.HasPrefix(opt, name) {
					return a, why
				}
			}
		}
		// Short aliases, only where they mean a gadget: rebase -x,
		// fetch -u, grep -O, archive -o, anywhere in a cluster.
		if len(a) >= 2 && a[0] == '-' && a[1] != '-' {
			for j := 1; j < len(a); j++ {
				if long, ok := gitSubShort[sub][a[j]]; ok {
					return a, gitSubOpts[long] + " (-" + string(a[j]) + " is " + long + ")"
				}
			}
		}
	}
	return "", ""
}

// sedGadget: a GNU sed script can run commands (e, s///e) and write files
// (w, W, s///w). Rather than parse sed scripts, sed is gadget-free only in
// its own --sandbox mode (which rejects e, w and r) and never with -i.
func sedGadget(args []string) (string, string) {
	sandbox := false
	for _, a := range args {
		if a == "--" {
			break
		}
		switch {
		case a == "--sandbox":
			sandbox = true
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a, "=")
			if len(name) >= 3 && strings.HasPrefix("--in-place", name) {
				return a, "edits files in place"
			}
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			for j := 1; j < len(a); j++ {
				if a[j] == 'i' {
					return a, "edits files in place"
				}
				if strings.IndexByte("efl", a[j]) >= 0 {
					break
				}
			}
		}
	}
	if !sandbox {
		return "sed", "a sed script can run commands (e, s///e) and write files (w, W); run it with --sandbox"
	}
	return "", ""
}

// compilerGadget: compiler driver options that run or load programs.
func compilerGadget(args []string) (string, string) {
	for _, a := range args {
		switch {
		case a == "-wrapper" || strings.HasPrefix(a, "-fplugin") || strings.HasPrefix(a, "-B") ||
			strings.HasPrefix(a, "-specs") || strings.HasPrefix(a, "--specs") || strings.HasPrefix(a, "-Xclang") ||
			strings.HasPrefix(a, "--gcc-toolchain") || strings.HasPrefix(a, "-fuse-ld=") || strings.HasPrefix(a, "--ld-path"):
			return a, "runs or loads the program or plugin it names"
		case strings.HasPrefix(a, "@"):
			return a, "reads more options from a file"
		}
	}
	return "", ""
}
