package nodeexec

import (
	"os"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// peelShell avoids a needless second shell: hostexec runs every command as
// `SHELL -c LINE`, and the line a node runs is usually itself
// `SHELL' -c SCRIPT` (the gateway sends ["/bin/sh","-c",COMMAND]). When LINE
// is exactly one simple command of three literal words [P, "-c", SCRIPT] and
// P is the same file as the runner's shell, running SCRIPT directly is the
// same program with the same argument, one exec cheaper. Anything else is
// returned unchanged (ok false).
func peelShell(line, shell string) (string, bool) {
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil || len(f.Stmts) != 1 {
		return line, false
	}
	st := f.Stmts[0]
	call, isCall := st.Cmd.(*syntax.CallExpr)
	if !isCall || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) != 3 {
		return line, false
	}
	words := make([]string, 0, 3)
	for _, w := range call.Args {
		s, ok := literalWord(w)
		if !ok {
			return line, false
		}
		words = append(words, s)
	}
	if words[1] != "-c" || !strings.HasPrefix(words[0], "/") {
		return line, false
	}
	a, err := os.Stat(words[0])
	if err != nil {
		return line, false
	}
	b, err := os.Stat(shell)
	if err != nil || !os.SameFile(a, b) {
		return line, false
	}
	return words[2], true
}

// literalWord returns a word made only of plain, single-quoted and
// expansion-free double-quoted parts.
func literalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			// Backslash escapes are literal; an unescaped glob, brace, tilde
			// or dollar makes the word something other than its text.
			v := x.Value
			for i := 0; i < len(v); i++ {
				switch c := v[i]; {
				case c == '\\' && i+1 < len(v):
					i++
					if v[i] != '\n' {
						b.WriteByte(v[i])
					}
				case strings.IndexByte(`\$*?[~{}`, c) >= 0:
					return "", false
				default:
					b.WriteByte(c)
				}
			}
		case *syntax.DblQuoted:
			if x.Dollar {
				return "", false
			}
			for _, q := range x.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok || strings.ContainsAny(l.Value, "$`\\") {
					return "", false
				}
				b.WriteString(l.Value)
			}
		case *syntax.SglQuoted:
			if x.Dollar {
				return "", false
			}
			b.WriteString(x.Value)
		default:
			return "", false
		}
	}
	return b.String(), true
}
