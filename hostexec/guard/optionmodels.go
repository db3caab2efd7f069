package guard

import (
	"path/filepath"
	"slices"
	"strings"
)

// The parsed programs: their gadget options (optGadget) and the options
// whose values are paths (optPath), which the external-directory check
// resolves like the arguments of cp or cat. Sources: tar(1) and the GNU tar
// manual ("checkpoints", "--to-command", "--use-compress-program", "remote
// tape server", "--info-script", "--keep-directory-symlink"); wget(1)
// (--execute runs wgetrc commands: use_askpass runs a program,
// output_document writes a file) and wgetrc commands; rg(1) (--pre,
// --hostname-bin); unzip(1) (-d, -: keeps ../ in names, -M pipes through
// more); zip(1) (-TT/--unzip-command, two-letter short options).

var tarModel = newOptModel("tar", tarOptionList, map[string]string{
	"--checkpoint-action":      "runs the action (exec=) it names",
	"--to-command":             "runs the command it names",
	"--use-compress-program":   "runs the program it names",
	"--rsh-command":            "runs the remote shell it names",
	"--rmt-command":            "runs the remote program it names",
	"--info-script":            "runs the script it names",
	"--absolute-names":         "writes outside the directory (keeps leading / and ..)",
	"--multi-volume":           "prompts and can spawn a shell",
	"--keep-directory-symlink": "extracts through symlinks to directories",
	"--dereference":            "archives what symlinks point to, wherever that is",
	"--interactive":            "prompts for each file (reads commands from its input)",
}, []string{"--file", "--directory", "--listed-incremental", "--files-from", "--exclude-from", "--volno-file", "--index-file", "--add-file", "--one-top-level"})

func init() { tarModel.oldStyle, tarModel.operandPaths = true, true }

// tarGadget: a gadget option of tar, an option it does not know, or a
// remote archive (host:file, reached through rsh unless --force-local).
func tarGadget(args []string) (string, string) {
	if w, why := tarModel.gadget(args); why != "" {
		return w, why
	}
	opts, _ := tarModel.parse(args)
	force := false
	for _, o := range opts {
		force = force || o.def == tarModel.long["--force-local"]
	}
	for _, o := range opts {
		if o.def == tarModel.long["--file"] && !force && strings.Contains(o.value, ":") {
			return o.word, "a remote archive (host:file) runs rsh"
		}
	}
	return "", ""
}

// tarPaths: tar's path options and operands, and each operand under each
// -C directory too (tar reads and writes operands relative to the last -C).
func tarPaths(args []string) []string {
	out := append(tarModel.paths(args), ".") // extracts into the working directory by default
	opts, operands := tarModel.parse(args)
	for _, o := range opts {
		if o.def == tarModel.long["--directory"] && o.value != "" {
			for _, op := range operands {
				if !filepath.IsAbs(op) {
					out = append(out, filepath.Join(o.value, op))
				}
			}
		}
	}
	return out
}

var wgetModel = newOptModel("wget", wgetOptionList, map[string]string{
	"--execute":     "runs wgetrc commands (use_askpass runs a program, output_document writes any file)",
	"--config":      "reads a wgetrc (its commands run programs and write files)",
	"--use-askpass": "runs the askpass program it names",
	"--background":  "detaches from the session",
}, []string{"--output-file", "--append-output", "--output-document", "--directory-prefix", "--input-file",
	"--rejected-log", "--load-cookies", "--save-cookies", "--post-file", "--body-file", "--certificate",
	"--private-key", "--ca-certificate", "--ca-directory", "--crl-file", "--hsts-file", "--warc-file",
	"--warc-tempdir", "--warc-dedup"})

var rgModel = newOptModel("rg", rgOptionList, map[string]string{
	"--pre":          "runs the preprocessor command it names on every file",
	"--hostname-bin": "runs the program it names",
}, nil)

// unzipModel: unzip(1) has single-letter options only (and zipinfo's
// after -Z); -d DIR is where it writes.
var unzipModel = func() *optModel {
	var list []string
	for _, c := range "ZplftuzvTxnqoajUCLXVKbBcDEFhiNsSWw12m^$" {
		list = append(list, "-"+string(c))
	}
	list = append(list, "-d =", "-P =", "-O =", "-I =", "-:", "-M")
	m := newOptModel("unzip", list, map[string]string{
		"-:": "keeps ../ in member names: writes outside the directory",
		"-M": "pipes its output through the more pager",
	}, []string{"-d"})
	m.operandPaths = true
	return m
}()

// zipGadget: zip's short options may be two letters (-TT, -la, -lf), so a
// cluster is ambiguous to any parser but zip's; any single-dash word that
// holds TT is refused (-qTT CMD is -q -TT CMD), as is any abbreviation of
// --unzip-command.
func zipGadget(args []string) (string, string) {
	for _, a := range args {
		if a == "--" {
			return "", ""
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.Contains(a, "TT") {
			return a, "runs the unzip command it names (-TT)"
		}
		if name, _, _ := strings.Cut(a, "="); strings.HasPrefix(a, "--") && len(name) >= 3 && strings.HasPrefix("--unzip-command", name) {
			return a, "runs the unzip command it names"
		}
	}
	return "", ""
}

// zipPaths: every word that is not an option is the archive, an input, or
// a separate option value (--out FILE, -lf LOG, -b DIR); an option word
// with a glued absolute path or =value counts too.
func zipPaths(args []string) []string {
	var out []string
	end := false
	for _, a := range args {
		switch {
		case end || a == "-" || !strings.HasPrefix(a, "-"):
			out = append(out, a)
		case a == "--":
			end = true
		default:
			if _, v, ok := strings.Cut(a, "="); ok {
				out = append(out, v)
			} else if i := strings.IndexByte(a, '/'); i > 0 {
				out = append(out, a[i:])
			}
		}
	}
	return out
}

// curlModel: curl(1). -K reads more options from a file (any of them,
// --output included); --unix-socket talks to the socket it names (the
// Docker socket is root); --engine loads an OpenSSL engine. The files it
// writes or reads and sends are path options; curlPaths adds the @file and
// <file forms of data options and file:// URLs.
var curlModel = newOptModel("curl", curlOptionList, map[string]string{
	"--config":               "reads options from the file it names",
	"--unix-socket":          "talks to the unix socket it names (the Docker socket is root)",
	"--abstract-unix-socket": "talks to the abstract unix socket it names",
	"--engine":               "loads the OpenSSL engine it names",
}, []string{"--output", "--output-dir", "--dump-header", "--cookie-jar", "--upload-file", "--trace", "--trace-ascii",
	"--stderr", "--libcurl", "--netrc-file", "--cacert", "--capath", "--cert", "--key", "--crlfile", "--etag-save",
	"--etag-compare", "--hsts", "--alt-svc", "--proxy-cacert", "--proxy-capath", "--proxy-cert", "--proxy-key",
	"--proxy-crlfile", "--ssl-sessions"})

// curlDataOptions read a file when their value starts with @ (or, for
// --form, holds =@ or =<); --cookie reads one when its value has no =.
var curlDataOptions = []string{"--data", "--data-binary", "--data-urlencode", "--data-ascii", "--json", "--form",
	"--form-string", "--header", "--proxy-header", "--cookie", "--write-out", "--url-query"}

func curlPaths(args []string) []string {
	out := append(curlModel.paths(args), ".") // -O and -J write into the working directory
	opts, operands := curlModel.parse(args)
	for _, o := range opts {
		if o.def == nil || !slices.ContainsFunc(curlDataOptions, func(s string) bool { return curlModel.long[s] == o.def }) {
			continue
		}
		v := o.value
		switch {
		case strings.HasPrefix(v, "@"):
			out = append(out, v[1:])
		case strings.Contains(v, "=@"):
			out = append(out, v[strings.Index(v, "=@")+2:])
		case strings.Contains(v, "=<"):
			out = append(out, v[strings.Index(v, "=<")+2:])
		case o.def == curlModel.long["--cookie"] && !strings.Contains(v, "="):
			out = append(out, v)
		}
	}
	urls := operands
	for _, o := range opts {
		if o.def != nil && o.def == curlModel.long["--url"] {
			urls = append(urls, o.value)
		}
	}
	for _, u := range urls {
		if rest, ok := cutPrefixFold(u, "file://"); ok {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				out = append(out, rest[i:])
			}
		}
	}
	return out
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// unzipPaths: unzip's -d and operands, and the working directory, where it
// extracts by default.
func unzipPaths(args []string) []string { return append(unzipModel.paths(args), ".") }

// wgetPaths: wget's path options and the working directory, where it
// writes by default.
func wgetPaths(args []string) []string { return append(wgetModel.paths(args), ".") }
