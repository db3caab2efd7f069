package guard

import (
	"fmt"
	"slices"
	"strings"
)

// Option parsing for the programs whose options the gadget table models
// (issue 25 finding 3: every bypass of the table was a spelling of an
// option it did not parse — `-qTT CMD` inside a cluster, `-o` for
// --output, `-e use_askpass=CMD` for --use-askpass, `-C DIR` glued into a
// cluster). optModel parses an argv the way the program's own getopt_long
// does: clusters of short options (`-xvC/dir` is -x -v -C /dir), a value
// glued or in the next word, `--opt=value` and `--opt value`, unique
// prefixes of long options (`--use-ask` is --use-askpass), and tar's old
// style first word (`xfC a.tar DIR`). Every spelling of an option maps to
// one optDef, so an alias cannot differ from its option. An option the
// model does not know, or an ambiguous abbreviation, is refused: the guard
// cannot tell what it does.

// argKind says whether an option takes a value.
type argKind uint8

const (
	argNone     argKind = iota
	argRequired         // glued (-ovalue, --opt=value) or the next word
	argOptional         // glued only
)

// optKind says what an option does.
type optKind uint8

const (
	optPlain  optKind = iota
	optGadget         // runs a command, loads code, or reads configuration that can
	optPath           // its value names a file or directory the program writes or reads
)

type optDef struct {
	spellings []string // "-o", "--output"
	arg       argKind
	kind      optKind
	why       string // for optGadget
}

// optModel is one program's options.
type optModel struct {
	program string
	defs    []*optDef
	short   map[string]*optDef // "o" (single letters; zip-style multi-letter spellings are words)
	long    map[string]*optDef // "--output"
	// oldStyle: a first word without a dash is a cluster whose letters
	// take their values from the following words (tar xfC a.tar DIR).
	oldStyle bool
	// operandPaths: operands name files the program reads or writes.
	operandPaths bool
}

// parsedOpt is one option occurrence.
type parsedOpt struct {
	def   *optDef // nil: unknown or ambiguous (problem says which)
	word  string  // the argv word it came from
	value string
	// problem explains a nil def.
	problem string
}

// newOptModel builds a model from an option list (optionlists.go format:
// spellings, then "=" or "=?") and the options' kinds: gadgets maps any
// spelling to why, paths lists spellings whose value is a path.
func newOptModel(program string, list []string, gadgets map[string]string, paths []string) *optModel {
	m := &optModel{program: program, short: map[string]*optDef{}, long: map[string]*optDef{}}
	for _, e := range list {
		f := strings.Fields(e)
		d := &optDef{}
		for _, w := range f {
			switch w {
			case "=":
				d.arg = argRequired
			case "=?":
				d.arg = argOptional
			default:
				d.spellings = append(d.spellings, w)
			}
		}
		for _, s := range d.spellings {
			if why, ok := gadgets[s]; ok {
				d.kind, d.why = optGadget, why
			}
			if d.kind == optPlain && slices.Contains(paths, s) {
				d.kind = optPath
			}
			if strings.HasPrefix(s, "--") {
				m.long[s] = d
			} else {
				m.short[s[1:]] = d
			}
		}
		m.defs = append(m.defs, d)
	}
	return m
}

// resolveLongDef resolves a long option name (with dashes, without
// =value): an exact spelling, else the one option that all spellings with
// that prefix belong to (getopt_long accepts a unique abbreviation).
func (m *optModel) resolveLongDef(name string) (*optDef, string) {
	if d, ok := m.long[name]; ok {
		return d, ""
	}
	var found *optDef
	var cands []string
	for s, d := range m.long {
		if strings.HasPrefix(s, name) {
			cands = append(cands, s)
			if found != nil && found != d {
				found = nil
				slices.Sort(cands)
				return nil, fmt.Sprintf("ambiguous abbreviation %s (%s)", name, strings.Join(cands, ", "))
			}
			found = d
		}
	}
	if found == nil {
		return nil, fmt.Sprintf("%s does not know %s", m.program, name)
	}
	return found, ""
}

// parse splits args (argv without the program) into options and
// operands. Options may follow operands (GNU permutation); "--" ends them.
func (m *optModel) parse(args []string) ([]parsedOpt, []string) {
	var opts []parsedOpt
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			d, problem := m.resolveLongDef(name)
			p := parsedOpt{def: d, word: a, problem: problem}
			if d != nil {
				switch {
				case d.arg == argRequired && !hasVal && i+1 < len(args):
					i++
					val, hasVal = args[i], true
				case d.arg == argNone && hasVal:
					p.def, p.problem = nil, fmt.Sprintf("%s takes no value", name)
				}
			}
			p.value = val
			opts = append(opts, p)
		case len(a) > 1 && a[0] == '-':
			i = m.cluster(args, i, a[1:], false, &opts)
		case i == 0 && m.oldStyle && a != "":
			i = m.cluster(args, i, a, true, &opts)
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands
}

// cluster parses the letters of one short-option word at args[i]. In the
// old style every letter that takes a value takes the next unused word.
// It returns the index of the last word it consumed.
func (m *optModel) cluster(args []string, i int, letters string, old bool, opts *[]parsedOpt) int {
	next := i + 1
	for j := 0; j < len(letters); j++ {
		c := letters[j : j+1]
		d, ok := m.short[c]
		if !ok {
			*opts = append(*opts, parsedOpt{word: args[i], problem: fmt.Sprintf("%s does not know -%s", m.program, c)})
			continue
		}
		p := parsedOpt{def: d, word: args[i]}
		switch {
		case d.arg == argNone:
		case old:
			if d.arg == argRequired && next < len(args) {
				p.value = args[next]
				next++
			}
		case j+1 < len(letters):
			p.value = letters[j+1:]
			j = len(letters)
		case d.arg == argRequired && next < len(args):
			p.value = args[next]
			next++
		}
		*opts = append(*opts, p)
	}
	return next - 1
}

// gadget is the first option of args that the model refuses, and why:
// a gadget option, an unknown option or an ambiguous abbreviation.
func (m *optModel) gadget(args []string) (string, string) {
	opts, _ := m.parse(args)
	for _, o := range opts {
		switch {
		case o.def == nil:
			return o.word, o.problem + ": the guard cannot tell what it does"
		case o.def.kind == optGadget:
			return o.word, o.def.why
		}
	}
	return "", ""
}

// paths are the values of m's path options and, when operandPaths, its
// operands: what the external-directory check resolves.
func (m *optModel) paths(args []string) []string {
	opts, operands := m.parse(args)
	var out []string
	for _, o := range opts {
		if o.def != nil && o.def.kind == optPath && o.value != "" {
			out = append(out, o.value)
		}
	}
	if m.operandPaths {
		out = append(out, operands...)
	}
	return out
}
