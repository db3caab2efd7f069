package shellword

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

var hostile = []string{
	"$'a\\nb'", "$\"x\"", "'", "''", `'"'"'`, `"`, `\`, "a'b\"c", "*", "?", "[a-z]", "{a,b}", "~root",
	"$HOME", "${x:-y}", "$(id)", "`id`", "$((1+1))", "a;b", "a|b", "a&b", "a>b", "<x", "#c", "x=1", "!", "--",
	"if", "then", "ünïcødé", "日本語", "emoji😀", "-rf", "", " ", "a b", "%s",
	"line1\nline2", "\n", "\t", "tab\there", "a\n'b'\n\"c\"\n$(id)", "trailing\\\n", "\n\n\tx\t\n",
}

// TestJoinParsesBack renders hostile words and reads the line back with
// mvdan's own parser, POSIX and bash, as an argument and as the command
// name: one plain command whose words hold no
// expansion and decode byte for byte to argv.
func TestJoinParsesBack(t *testing.T) {
	for _, lang := range []syntax.LangVariant{syntax.LangPOSIX, syntax.LangBash} {
		for _, w := range hostile {
			for _, argv := range [][]string{{"/usr/bin/printf", w, "tail"}, {w, "tail"}} {
				line, err := Join(argv)
				if err != nil {
					t.Fatalf("Join(%q): %v", argv, err)
				}
				f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(line), "")
				if err != nil {
					t.Fatalf("%s: parse %q: %v", lang, line, err)
				}
				if len(f.Stmts) != 1 {
					t.Fatalf("%s: %q parses to %d statements", lang, line, len(f.Stmts))
				}
				call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
				if !ok || len(call.Assigns) != 0 || len(f.Stmts[0].Redirs) != 0 || f.Stmts[0].Negated {
					t.Fatalf("%s: %q is not one plain command", lang, line)
				}
				var got []string
				for _, word := range call.Args {
					syntax.Walk(word, func(n syntax.Node) bool {
						switch n.(type) {
						case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob, *syntax.BraceExp:
							t.Errorf("%s: %q: word %q holds an expansion %T", lang, line, w, n)
						}
						return true
					})
					if l := word.Lit(); strings.ContainsAny(l, "*?[{~") {
						t.Errorf("%s: %q: bare glob-like word %q", lang, line, l)
					}
					s, err := expand.Literal(nil, word)
					if err != nil {
						t.Fatalf("%s: %q: expand word: %v", lang, line, err)
					}
					got = append(got, s)
				}
				if !slices.Equal(got, argv) {
					t.Errorf("%s: Join(%q) = %q parses back to %q", lang, argv, line, got)
				}
			}
		}
	}
}

// TestJoinSplitsInRealShells runs the line in dash (/bin/sh) and bash and
// compares the words the shell hands to a function.
func TestJoinSplitsInRealShells(t *testing.T) {
	line, err := Join(hostile)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, a := range hostile {
		want.WriteString("<" + a + ">")
	}
	for _, sh := range []string{"/bin/sh", "/bin/bash"} {
		got, err := exec.Command(sh, "-c", `f() { for a in "$@"; do printf '<%s>' "$a"; done; }; f `+line).Output()
		if err != nil {
			t.Fatalf("%s %q: %v", sh, line, err)
		}
		if string(got) != want.String() {
			t.Errorf("%s splits %q to %q, want %q", sh, line, got, want.String())
		}
	}
}

func TestQuoteRefusesUnquotable(t *testing.T) {
	for _, s := range []string{"a\x00b", "bell\a", "cr\r", "\x1b[31m", "\xff", "nbsp\u00a0", "zw\u200b", "x\n\x00"} {
		if q, err := Quote(s); !errors.Is(err, ErrUnquotable) {
			t.Errorf("Quote(%q) = %q, %v; want ErrUnquotable", s, q, err)
		}
	}
	if _, err := Join([]string{"ok", "a\x00b"}); !errors.Is(err, ErrUnquotable) || !strings.Contains(err.Error(), "argv[1]") {
		t.Errorf("Join error %v does not name argv[1] and wrap ErrUnquotable", err)
	}
}
