package guard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOptionModels is the table per parsed program (issue 25 finding 3):
// allowed and refused argvs, with clusters, glued and separate values,
// short/long aliases, unique abbreviations, unknown and ambiguous options.
func TestOptionModels(t *testing.T) {
	cases := map[string][]struct {
		argv   string
		gadget bool
	}{
		"tar": {
			{"tar -cf a.tar f", false},
			{"tar -czvf a.tgz dir", false},
			{"tar xvf a.tar", false},
			{"tar -xf a.tar -C out", false},
			{"tar --extract --file=a.tar --directory out", false},
			{"tar --ext --file=a.tar", false}, // a unique abbreviation of a harmless option
			{"tar -x --fil=a.tar", true},      // ambiguous: --file, --files-from
			{"tar -tvf a.tar --wildcards '*.go'", false},
			{"tar --to-command=id -xf a.tar", true},
			{"tar --to-c=id -xf a.tar", true},
			{"tar -xvIid -f a.tar", true},  // -I glued in a cluster
			{"tar -xvf a.tar -I id", true}, // after the operands (permutation)
			{"tar xIf id a.tar", true},     // old style
			{"tar --use-compress=id -cf a f", true},
			{"tar --checkpoint=1 --checkpoint-action=exec=id -cf a f", true},
			{"tar --rsh=id -cf a f", true},
			{"tar --rmt-command=id -cf a f", true},
			{"tar -F id -cf a f", true},
			{"tar --new-volume-s=id -cf a f", true},
			{"tar -cvhf a f", true},                      // -h follows symlinks out
			{"tar -x --keep-directory-s -f a.tar", true}, // abbreviation of --keep-directory-symlink
			{"tar -xPf a.tar", true},
			{"tar -cf h:a.tar f", true},
			{"tar -cfh:a.tar f", true},
			{"tar --force-local -cf c:a.tar f", false},
			{"tar --bogus -cf a f", true},      // unknown: cannot tell what it does
			{"tar -cyf a f", true},             // unknown letter in a cluster
			{"tar --no-ignore -cf a f", true},  // ambiguous abbreviation
			{"tar --verbose=1 -cf a f", true},  // takes no value
			{"tar -- -weird-name-file", false}, // operands after --
		},
		"zip": {
			{"zip -r z.zip dir", false},
			{"zip -q -T z.zip f", false},
			{"zip z.zip f -T -qTT id", true},
			{"zip -TTid z.zip f", true},
			{"zip -TT=id z.zip f", true},
			{"zip -qTT id z.zip f", true},
			{"zip --unzip-command id z.zip f", true},
			{"zip --unzip-c=id z.zip f", true},
			{"zip --unz=id z.zip f", true},
			{"zip z.zip -- -TT", false}, // a file named -TT
		},
		"unzip": {
			{"unzip -l z.zip", false},
			{"unzip -qo z.zip -d out", false},
			{"unzip -qdout z.zip", false},
			{"unzip z.zip -x a b", false},
			{"unzip -Z -1 z.zip", false},
			{"unzip -: z.zip", true},
			{"unzip -qo: z.zip", true},
			{"unzip -M z.zip", true},
			{"unzip -Y z.zip", true},  // unknown letter
			{"unzip --q z.zip", true}, // negation form: not modelled, refused
		},
		"wget": {
			{"wget -q u", false},
			{"wget -qO out.html u", false},
			{"wget --output-document=out u", false},
			{"wget -nv -c u", false},
			{"wget --no-verb u", false},
			{"wget --use-askpass=id u", true},
			{"wget --use-ask=id u", true},
			{"wget -e use_askpass=id u", true},
			{"wget -qe use_askpass=id u", true},
			{"wget --execute use_askpass=id u", true},
			{"wget --exec=output_document=/etc/x u", true},
			{"wget --config=rc u", true},
			{"wget -b u", true},
			{"wget --no-c u", true}, // ambiguous: --no-cache, --no-check-certificate, --no-clobber ...
			{"wget --bogus u", true},
			{"wget -Z u", true},
		},
		"rg": {
			{"rg -n foo", false},
			{"rg -A3 -i foo dir", false},
			{"rg --type=go -w foo", false},
			{"rg -z foo", false},
			{"rg --pre id foo", true},
			{"rg --pre=id foo", true},
			{"rg --pre-glob '*' --pre id foo", true},
			{"rg --hostname-bin=id foo", true},
			{"rg --bogus foo", true},
			{"rg -e --pre foo", false}, // --pre is -e's value (a pattern)
			{"rg -- --pre f", false},   // a pattern after --
		},
		"curl": {
			{"curl -fsSL https://x", false},
			{"curl -sSo out.json https://x", false},
			{"curl -H 'Accept: x' -d a=b https://x", false},
			{"curl -K rc https://x", true},
			{"curl -sK rc https://x", true},
			{"curl --conf=rc https://x", true},
			{"curl --unix-socket /var/run/docker.sock http://x/containers/json", true},
			{"curl --unix-s=/var/run/docker.sock http://x", true},
			{"curl --engine x https://x", true},
			{"curl --bogus https://x", true},
		},
		"find, sed, awk": {
			{"find . -name '*.go' -type f", false},
			{"find . -name x -exec id ';'", true},
			{"find . -newer f -fprint out", true},
			{"find . -delete", true},
			{"sed --sandbox -n 1p f", false},
			{"sed -n 1p f", true},
			{"sed --sandbox -ni s/a/b/ f", true},
			{"sed --sandbox --in-pl s/a/b/ f", true},
			{"sed --sandbox --i s/a/b/ f", true}, // sed reads --i as --in-place
			{"sort --o=x f", true},               // sort reads --o as --output
			{"sort --compress-p=x f", true},
			{"awk 1 f", true},
			{"mawk 1 f", true},
		},
		"git": {
			{"git archive --format=tar HEAD", false},
			{"git archive -v HEAD", false},
			{"git archive -o x HEAD", true},
			{"git archive -ox HEAD", true},
			{"git archive -vo x HEAD", true},
			{"git archive --output=x HEAD", true},
			{"git archive --out=x HEAD", true},
			{"git archive --remote=h HEAD", true},
			{"git format-patch -o dir 'HEAD~1'", true},
			{"git rebase -ix true main", true},
			{"git fetch -qu id origin", true},
			{"git clone -qc core.fsmonitor=id u d", true},
			{"git log -p", false},
		},
	}
	for prog, rows := range cases {
		for _, c := range rows {
			argv := shellWords(t, c.argv)
			arg, why := Gadget(argv, false, argv[0])
			if (why != "") != c.gadget {
				t.Errorf("%s: Gadget(%q) = %q %q, want gadget=%v", prog, c.argv, arg, why, c.gadget)
			}
		}
	}
}

func shellWords(t *testing.T, s string) []string {
	t.Helper()
	c, err := oneCall(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	var out []string
	for _, a := range c.Args {
		v, rule, msg := word(a)
		if rule != "" {
			t.Fatalf("%q: %s %s", s, rule, msg)
		}
		out = append(out, v)
	}
	return out
}

// TestOptionModelPaths: the path options and operands of tar, zip, unzip
// and wget go through the external-directory check, however they are
// spelled.
func TestOptionModelPaths(t *testing.T) {
	h := newHost(t)
	outside := filepath.Join(filepath.Dir(h.ws), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	o := outside
	cases := []struct {
		cmd  string
		want []string
	}{
		{"tar -xf a.tar -C sub", nil},
		{"tar -cf a.tar f", nil},
		{"tar -xf a.tar -C " + o, []string{o}},
		{"tar -xvC" + o + " -f a.tar", []string{o}},
		{"tar xfC a.tar " + o, []string{o}},
		{"tar -x --dir " + o + " -f a.tar", []string{o}},
		{"tar -x --directory=" + o + " -f a.tar", []string{o}},
		{"tar -cf " + o + "/a.tar f", []string{o + "/a.tar"}},
		{"tar -cvf" + o + "/a.tar f", []string{o + "/a.tar"}},
		{"tar cf " + o + "/a.tar f", []string{o + "/a.tar"}},
		{"tar -cf a.tar " + o + "/secret", []string{o + "/secret"}},
		{"tar -cf a.tar -T " + o + "/list", []string{o + "/list"}},
		{"tar -cf a.tar -g" + o + "/snap f", []string{o + "/snap"}},
		{"tar -cf a.tar -C sub ../../x", []string{h.ws + "/../../x", h.ws + "/../x"}},
		{"zip z.zip f", nil},
		{"zip " + o + "/z.zip f", []string{o + "/z.zip"}},
		{"zip -O" + o + "/z.zip z.zip f", []string{o + "/z.zip"}},
		{"zip --out=" + o + "/z.zip z.zip f", []string{o + "/z.zip"}},
		{"zip -lf " + o + "/log z.zip f", []string{o + "/log"}},
		{"unzip -q z.zip -d sub", nil},
		{"unzip -q z.zip -d " + o, []string{o}},
		{"unzip -qd" + o + " z.zip", []string{o}},
		{"unzip " + o + "/z.zip", []string{o + "/z.zip"}},
		{"wget -q u", nil},
		{"wget -O " + o + "/x u", []string{o + "/x"}},
		{"wget -qO" + o + "/x u", []string{o + "/x"}},
		{"wget --output-doc=" + o + "/x u", []string{o + "/x"}},
		{"wget -P " + o + " u", []string{o}},
		{"wget --post-file=" + o + "/secret u", []string{o + "/secret"}},
		{"wget -a" + o + "/log u", []string{o + "/log"}},
		{"curl -sSo out.json https://x", nil},
		{"curl -so" + o + "/x https://x", []string{o + "/x"}},
		{"curl --output-dir " + o + " -O https://x/y", []string{o}},
		{"curl -d @" + o + "/secret https://x", []string{o + "/secret"}},
		{"curl --data-binary=@" + o + "/secret https://x", []string{o + "/secret"}},
		{"curl -F f=@" + o + "/secret https://x", []string{o + "/secret"}},
		{"curl -T " + o + "/secret https://x", []string{o + "/secret"}},
		{"curl -b " + o + "/cookies https://x", []string{o + "/cookies"}},
		{"curl -b a=b https://x", nil},
		{"curl file://" + o + "/secret", []string{o + "/secret"}},
		{"curl --url FILE://localhost" + o + "/secret", []string{o + "/secret"}},
	}
	for _, c := range cases {
		a := Analyze(c.cmd, h.env)
		if !a.OK {
			t.Errorf("%q: %s", c.cmd, a.Reason)
			continue
		}
		got := ExternalPaths(a, h.ws)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: external %v, want %v", c.cmd, got, want)
		}
	}
	// Run in a directory outside the workspace, each writes there by
	// default: the working directory is one of its paths.
	env := h.env
	env.Cwd = outside
	for _, cmd := range []string{"tar -xf " + h.ws + "/a.tar", "unzip " + h.ws + "/z.zip", "wget -q u", "curl -O https://x/y"} {
		a := Analyze(cmd, env)
		if !a.OK {
			t.Errorf("%q: %s", cmd, a.Reason)
			continue
		}
		if got := ExternalPaths(a, h.ws); !slices.Contains(got, outside+"/.") {
			t.Errorf("%q in %s: external %v, want the working directory", cmd, outside, got)
		}
	}
}

// TestOptionListsWellFormed: every spelling is defined once per program
// and starts with a dash, so an alias cannot mean two things.
func TestOptionListsWellFormed(t *testing.T) {
	for name, list := range map[string][]string{"tar": tarOptionList, "wget": wgetOptionList, "rg": rgOptionList, "curl": curlOptionList} {
		seen := map[string]bool{}
		for _, e := range list {
			for _, w := range strings.Fields(e) {
				if w == "=" || w == "=?" {
					continue
				}
				if !strings.HasPrefix(w, "-") || seen[w] {
					t.Errorf("%s: spelling %q is malformed or defined twice", name, w)
				}
				seen[w] = true
			}
		}
	}
	// Every gadget and path option named in a model exists in its list.
	for _, m := range []*optModel{tarModel, wgetModel, rgModel, unzipModel, curlModel} {
		for _, d := range m.defs {
			if len(d.spellings) == 0 {
				t.Errorf("%s: an option without a spelling", m.program)
			}
		}
	}
	for _, s := range []string{"--checkpoint-action", "--to-command", "--use-compress-program", "--rsh-command", "--rmt-command", "--info-script", "--absolute-names", "--multi-volume", "--file", "--directory"} {
		if _, ok := tarModel.long[s]; !ok {
			t.Errorf("tar: %s missing from the list", s)
		}
	}
	for _, s := range []string{"--execute", "--config", "--use-askpass", "--output-document", "--directory-prefix"} {
		if _, ok := wgetModel.long[s]; !ok {
			t.Errorf("wget: %s missing from the list", s)
		}
	}
	for _, s := range []string{"--config", "--unix-socket", "--output", "--upload-file", "--url"} {
		if _, ok := curlModel.long[s]; !ok {
			t.Errorf("curl: %s missing from the list", s)
		}
	}
	if d := rgModel.long["--pre"]; d == nil || d.kind != optGadget {
		t.Errorf("rg: --pre is not a gadget")
	}
}

// FuzzOptionParse: every parsed program splits any argv without a panic,
// every option it reports names a word of the argv, and every operand is a
// word of the argv.
func FuzzOptionParse(f *testing.F) {
	for _, s := range []string{"-xvC/d\x00-f\x00a", "xfC\x00a\x00b", "--use-ask=x", "-qe\x00x", "--\x00-x", "-", "--=x", "-nv"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		for _, m := range []*optModel{tarModel, wgetModel, rgModel, unzipModel, curlModel} {
			opts, operands := m.parse(args)
			for _, o := range opts {
				if !slices.Contains(args, o.word) {
					t.Fatalf("%s: option from %q, not a word of %q", m.program, o.word, args)
				}
				if o.def == nil && o.problem == "" {
					t.Fatalf("%s: %q unknown without a reason", m.program, o.word)
				}
			}
			for _, op := range operands {
				if !slices.Contains(args, op) {
					t.Fatalf("%s: operand %q not a word of %q", m.program, op, args)
				}
			}
			_ = m.paths(args)
		}
	})
}
