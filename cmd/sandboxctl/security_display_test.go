package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSecurityApprovalBlankCodePointsEscaped replays issue 25 finding 9:
// `approvals list` printed U+3164 (Hangul filler) and U+2800 (braille
// blank) raw, and the console escaped the first but not the second; both
// render blank, so a command could look like another. Now the CLI and the
// console (in Chromium) show every such code point as \u{XXXX}, by one rule
// (package display).
func TestSecurityApprovalBlankCodePointsEscaped(t *testing.T) {
	e := guardEnv(t, "")
	if r := e.run(t, "approvals", "list"); r.code != 0 { // starts the daemon
		t.Fatalf("approvals list: %+v", r)
	}
	link := startUI(t, e)
	ctx := browser(t)
	within(t, ctx, 30*time.Second, "log in with the one-time link",
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#nav")))

	blanks := "\u3164\u2800\u115f\u1160\uffa0\u00a0\u200b\U000e0041"
	d := execJSON(t, e, "--agent", "agent-blank", "--env", "BLANK_NOTE=x"+blanks+"y", "--", "echo ok"+blanks+"done")
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	escaped := `\u{3164}\u{2800}\u{115f}\u{1160}\u{ffa0}\u{00a0}\u{200b}\u{e0041}`

	r := e.run(t, "approvals", "list")
	// argv and env values are Go-quoted, then escaped: the Go quoting
	// already writes the non-printable ones (\u00a0...).
	if !strings.Contains(r.stdout, "ok"+escaped+"done") || !strings.Contains(r.stdout, `BLANK_NOTE="x\u{3164}\u{2800}\u{115f}\u{1160}\u{ffa0}\u00a0`) {
		t.Errorf("approvals list does not show the blanks escaped:\n%s", r.stdout)
	}
	for _, c := range blanks {
		if strings.ContainsRune(r.stdout, c) {
			t.Errorf("approvals list prints %U raw:\n%s", c, r.stdout)
		}
	}

	card := `.approval[data-id="` + id + `"]`
	waitJS(t, ctx, 15*time.Second, "the pending approval appears", `!!document.querySelector('`+card+`')`)
	shown := evalJS[string](t, ctx, `document.querySelector('`+card+`').textContent`)
	if !strings.Contains(shown, "ok"+escaped+"done") || !strings.Contains(shown, "BLANK_NOTE=x"+escaped+"y") {
		t.Errorf("the console card does not show the blanks escaped:\n%s", shown)
	}
	for _, c := range blanks {
		if strings.ContainsRune(shown, c) {
			t.Errorf("the console shows %U raw:\n%s", c, shown)
		}
	}
}
