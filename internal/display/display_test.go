package display

import (
	"strings"
	"testing"
	"unicode"
)

// TestSecurityHiddenByCategory checks Hidden against the Unicode tables:
// every code point of the hidden categories and properties is hidden, and
// of the visible categories only the listed blank-rendering ones are
// (issue 25, finding 9: U+3164 and U+2800 printed raw in approvals list).
func TestSecurityHiddenByCategory(t *testing.T) {
	hiddenTables := map[string]*unicode.RangeTable{
		"Cc": unicode.Cc, "Cf": unicode.Cf, "Co": unicode.Co, "Cs": unicode.Cs,
		"Zl": unicode.Zl, "Zp": unicode.Zp, "Zs": unicode.Zs,
		"Other_Default_Ignorable_Code_Point": unicode.Other_Default_Ignorable_Code_Point,
		"Variation_Selector":                 unicode.Variation_Selector,
	}
	for name, tab := range hiddenTables {
		n := 0
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if !unicode.Is(tab, r) || r == ' ' {
				continue
			}
			n++
			if !Hidden(r) {
				t.Errorf("%U (%s) is not hidden", r, name)
			}
		}
		if n == 0 {
			t.Errorf("%s: no code points checked", name)
		}
	}
	// Visible categories: hidden only when default-ignorable or the blank
	// braille cell.
	visibleCats := []string{"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So"}
	for _, cat := range visibleCats {
		tab := unicode.Categories[cat]
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if !unicode.Is(tab, r) {
				continue
			}
			want := r == BrailleBlank || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
			if Hidden(r) != want {
				t.Errorf("%U (%s): Hidden = %v, want %v", r, cat, Hidden(r), want)
			}
		}
	}
	// Unassigned (Cn) code points are hidden.
	for _, r := range []rune{0x0378, 0x0530, 0x2fffd, 0x1fffe} {
		if unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) {
			t.Fatalf("%U is assigned: pick another", r)
		}
		if !Hidden(r) {
			t.Errorf("unassigned %U is not hidden", r)
		}
	}
	// The code points of the finding and their kin, and the ASCII space.
	for _, r := range []rune{0x3164, 0x2800, 0x115f, 0x1160, 0xffa0, 0x200b, 0x202e, 0x00a0, 0x3000, 0x2028, 0xfeff, 0xe000, 0x034f, 0xfe0f, 0xe0001} {
		if !Hidden(r) {
			t.Errorf("%U is not hidden", r)
		}
	}
	for _, r := range " aZ09~é漢ㄱ가⠁" {
		if Hidden(r) {
			t.Errorf("%U (%q) is hidden", r, r)
		}
	}
}

func TestSecurityEscape(t *testing.T) {
	for _, tt := range []struct{ in, keep, want string }{
		{"git status", "", "git status"},
		{"rm\u3164-rf", "", `rm\u{3164}-rf`},
		{"echo \u2800", "", `echo \u{2800}`},
		{"a\nb\tc", "", `a\u{000a}b\u{0009}c`},
		{"a\nb\tc", "\n\t", "a\nb\tc"},
		{"e\u0301", "", "e\u0301"},               // a mark on a letter shows
		{"\u0301x", "", `\u{0301}x`},             // alone at the start it does not
		{"a \u20dd", "", `a \u{20dd}`},           // nor after a space
		{"\u200b\u0301", "", `\u{200b}\u{0301}`}, // nor after an escaped one
		{`\u{3164}`, "", `\u{005c}u{3164}`},      // an escape in the text cannot pass for one of ours
		{`C:\users`, "", `C:\users`},
		{"x\xffy", "", `x\x{ff}y`},
		{"漢字 ㄱ", "", "漢字 ㄱ"},
	} {
		if got := Escape(tt.in, tt.keep); got != tt.want {
			t.Errorf("Escape(%q, %q) = %q, want %q", tt.in, tt.keep, got, tt.want)
		}
	}
}

// TestJSCharClassMatchesHidden checks the console's class lists exactly
// the hidden code points, less the kept ones.
func TestJSCharClassMatchesHidden(t *testing.T) {
	class := JSCharClass("\n\t")
	for _, want := range []string{`\u{0}-\u{8}`, `\u{b}-\u{1f}`, `\u{3164}`, `\u{2800}`, `\u{115f}-\u{1160}`} {
		if !strings.Contains(class, want) {
			t.Errorf("the class lacks %s", want)
		}
	}
	if strings.Contains(class, `\u{a}`) || strings.Contains(class, `\u{9}`) || strings.Contains(class, `\u{20}`) {
		t.Errorf("the class holds a kept code point or the space: %.200s", class)
	}
}
