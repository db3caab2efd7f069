package guard

import (
	"strings"
	"testing"
)

// corpus is the table of command lines the analyser must accept ("" rule)
// or refuse with the given rule. {ws}, {evil} and {tbin} are replaced by
// the test host's directories.
var corpus = []struct {
	cmd  string
	rule Rule
}{
	// accepted: plain commands, quoting, chains, pipelines
	{`ls`, ""},
	{`ls -la`, ""},
	{`echo hello world`, ""},
	{`echo 'single quoted $HOME'`, ""},
	{`echo "double quoted literal"`, ""},
	{`echo "a\$b"`, ""},
	{`echo a\ b`, ""},
	{`echo \*`, ""},
	{`git status`, ""},
	{`git log --oneline -n 5`, ""},
	{`ls && echo done`, ""},
	{`ls || echo failed`, ""},
	{`ls; echo next`, ""},
	{"ls\necho next", ""},
	{"ls\n\nls", ""},
	{`ls;`, ""},
	{`ls | wc -l`, ""},
	{`cat file.txt | head -n 5 | sort | uniq -c`, ""},
	{`ls -la | grep foo | sort -r | uniq | head -n 3 | tail -n 1 | wc -c`, ""},
	{`true && false || true`, ""},
	{`id`, ""},
	{`/usr/bin/id -u`, ""},
	{`echo a=b`, ""},
	{`echo --flag=value`, ""},
	{`ls -- -weird`, ""},
	{`echo ''`, ""},
	{`echo "" x`, ""},
	{`printf '%s\n' a b`, ""},
	{`echo 'it'\''s'`, ""},
	{`echo "it's"`, ""},
	{`echo é ü 日本`, ""},
	{`echo a#b`, ""},
	{`echo % @ ^ + !`, ""},
	{`echo a,b`, ""},
	{`cat -- 'a file'`, ""},
	{`echo "multi word" | tr a-z A-Z`, ""},
	{`echo x | cut -d: -f1`, ""},
	{`mkdir -p build/out`, ""},
	{`find . -name x -exec ls {} \;`, ""},
	{`find . -name x -exec ls {} +`, ""},
	{`grep -r foo .`, ""},
	{`sort -o out.txt in.txt`, ""},
	{`jq . file.json`, ""},
	{`head -n 1 file`, ""},
	{`tr -d '*'`, ""},
	// accepted redirections and here-documents
	{`ls 2>&1`, ""},
	{`ls >&2`, ""},
	{`ls 1>&2`, ""},
	{`ls >/dev/null`, ""},
	{`ls 2>/dev/null`, ""},
	{`ls &>/dev/null`, ""},
	{`ls >>/dev/null`, ""},
	{`ls 2>&1 | wc -l`, ""},
	{"cat <<'EOF'\nhello $HOME ${x} $? $$ $1 $@\nEOF", ""},
	{"cat <<\"EOF\"\n$x\nEOF", ""},
	{"cat <<EOF\nplain text\nEOF", ""},
	{"cat <<-'EOF'\n\t$x\n\tEOF", ""},
	// accepted wrappers
	{`bash -c 'echo hi'`, ""},
	{`bash -lc 'ls | wc -l'`, ""},
	{`sh -c 'ls && echo ok'`, ""},
	{`/bin/sh -c ls`, ""},
	{`/usr/bin/bash -c 'echo a' arg0 arg1`, ""},
	{`dash -ec 'ls'`, ""},
	{`bash -c "echo hi"`, ""},
	{`bash -o pipefail -c 'ls | wc -l'`, ""},
	{`bash --noprofile --norc -c ls`, ""},
	{`zsh -lc whoami`, ""},
	{`ksh -c 'ls'`, ""},
	{`sh -c 'sh -c "ls"'`, ""},
	{`bash -c 'env -i ls'`, ""},
	{`env FOO=bar ls`, ""},
	{`env -i ls`, ""},
	{`env -u HOME ls`, ""},
	{`env -S 'ls -la'`, ""},
	{`env --split-string='ls -la'`, ""},
	{`env -S 'FOO=1 ls' -la`, ""},
	{`env`, ""},
	{`env -- ls`, ""},
	{`/usr/bin/env ls`, ""},
	{`nohup ls`, ""},
	{`timeout 5 ls`, ""},
	{`timeout -s KILL 5 ls`, ""},
	{`timeout --signal=KILL -k 1 5 ls`, ""},
	{`timeout 5 bash -c 'ls'`, ""},
	{`nice -n 10 ls`, ""},
	{`nice -5 ls`, ""},
	{`nice`, ""},
	{`stdbuf -oL ls`, ""},
	{`stdbuf --output=L ls`, ""},
	{`sudo -n -u root ls`, ""},
	{`sudo FOO=1 ls`, ""},
	{`exec ls`, ""},
	{`command ls`, ""},
	{`command -p ls`, ""},
	{`nohup timeout 5 nice -n 1 stdbuf -oL env -i ls`, ""},
	{`cd sub && ls`, ""},
	{`cd .. && ls`, ""},
	{`cd -P /tmp && ls`, ""},

	// substitution (lexical and structural)
	{`echo "output: $(whoami)"`, RuleSubstitution},
	{"echo \"output: `id`\"", RuleSubstitution},
	{`echo $(id)`, RuleSubstitution},
	{"echo `id`", RuleSubstitution},
	{`cat <(ls)`, RuleSubstitution},
	{`tee >(cat)`, RuleSubstitution},
	{`diff <(ls) <(ls)`, RuleSubstitution},
	{`echo '$(id)'`, RuleSubstitution},
	{`bash -c 'echo $(id)'`, RuleSubstitution},
	{`bash -c "echo \$(id)"`, RuleSubstitution},
	{"cat <<EOF\n$(id)\nEOF", RuleSubstitution},
	{"cat <<'EOF'\n$(id)\nEOF", RuleSubstitution},
	{"cat <<EOF\n`id`\nEOF", RuleSubstitution},
	{`echo $((1+2))`, RuleSubstitution},
	{`echo "${x}$(y)"`, RuleSubstitution},
	{`echo $\(`, RuleSubstitution}, // found by FuzzAnalyze: decodes to $(
	{`echo "<\(id)"`, ""},          // the backslash stays inside double quotes: literal <\(id)
	{`echo \<\(id\)`, RuleSubstitution},
	{`bash -c "echo $\(id)"`, RuleParse},
	{`echo '$'\(`, RuleSubstitution},
	// parameter expansion
	{`echo $HOME`, RuleParamExpansion},
	{`echo ${HOME}`, RuleParamExpansion},
	{`echo "$HOME"`, RuleParamExpansion},
	{`echo $1`, RuleParamExpansion},
	{`echo $@`, RuleParamExpansion},
	{`echo $?`, RuleParamExpansion},
	{`echo $$`, RuleParamExpansion},
	{`echo "${HOME:-x}"`, RuleParamExpansion},
	{`ls $DIR/x`, RuleParamExpansion},
	{`$CMD`, RuleParamExpansion},
	{`sh -lc '$0 "$@"' id`, RuleParamExpansion},
	{`bash -c 'echo $HOME'`, RuleParamExpansion},
	// here-documents that expand, here-strings
	{"cat <<EOF\n$HOME\nEOF", RuleHeredoc},
	{"cat <<EOF\n${x}\nEOF", RuleHeredoc},
	{"cat <<EOF\n$?\nEOF", RuleHeredoc},
	{"cat <<EOF\n$$\nEOF", RuleHeredoc},
	{"cat <<EOF\n$1 $@\nEOF", RuleHeredoc},
	{"cat <<EOF\nback\\slash\nEOF", RuleHeredoc},
	{`cat <<< "x"`, RuleHeredoc},
	// arithmetic
	{`((x=1))`, RuleArithmetic},
	{`let x=1`, RuleArithmetic},
	{`echo $[1+2]`, RuleArithmetic},
	// line continuation, control characters, parse errors
	{"echo \"$\\\n(id)\"", RuleLineContinuation},
	{"ec\\\nho hi", RuleLineContinuation},
	{"ls \\\n -la", RuleLineContinuation},
	{"echo '\\'\"\n\"", RuleLineContinuation},
	{"ls\rrm -rf x", RuleControlChar},
	{"ls\x00", RuleControlChar},
	{"echo \x1b[31m", RuleControlChar},
	{"echo \xff", RuleControlChar},
	{"echo \u202eexe.txt", RuleControlChar},
	{"echo a\u200bb", RuleControlChar},
	{"echo \u0085", RuleControlChar},
	{"ls\u2028rm x", RuleControlChar},
	{`echo "unterminated`, RuleParse},
	{`echo 'unterminated`, RuleParse},
	{`ls |`, RuleParse},
	{`&& ls`, RuleParse},
	{`ls &&`, RuleParse},
	{`(ls`, RuleParse},
	{`if`, RuleParse},
	{`;`, RuleParse},
	// comments
	{`ls # comment`, RuleComment},
	{`# just a comment`, RuleComment},
	{"ls\n# c", RuleComment},
	// redirections
	{`ls > out.txt`, RuleRedirect},
	{`ls >> out.txt`, RuleRedirect},
	{`cat < in.txt`, RuleRedirect},
	{`ls 2> err.txt`, RuleRedirect},
	{`ls &> out.txt`, RuleRedirect},
	{`ls 3>&1`, RuleRedirect},
	{`ls >&3`, RuleRedirect},
	{`ls <> f`, RuleRedirect},
	{`ls >| f`, RuleRedirect},
	{`ls > /etc/passwd`, RuleRedirect},
	{`ls 2>&1 > f`, RuleRedirect},
	{`ls 2>&2`, RuleRedirect},
	{`exec 3>/dev/tcp/x/1`, RuleRedirect},
	// background, |&, negation, coprocess
	{`ls &`, RuleBackground},
	{`sleep 1 & ls`, RuleBackground},
	{`nohup sleep 600 | cat &`, RuleBackground},
	{`ls |& cat`, RulePipeAll},
	{`! ls`, RuleNegation},
	{`coproc ls`, RuleCoprocess},
	// compound commands
	{`(ls)`, RuleSubshell},
	{`{ ls; }`, RuleGroup},
	{`{ ls; } > f`, RuleGroup},
	{`f() { ls; }`, RuleFunction},
	{`function f { ls; }`, RuleFunction},
	{`if true; then ls; fi`, RuleCompound},
	{`for i in a; do ls; done`, RuleCompound},
	{`while true; do ls; done`, RuleCompound},
	{`until false; do ls; done`, RuleCompound},
	{`case x in x) ls;; esac`, RuleCompound},
	{`select x in a; do ls; done`, RuleCompound},
	{`time ls`, RuleCompound},
	{`[[ -f x ]]`, RuleTestClause},
	// assignments
	{`FOO=bar ls`, RuleAssignment},
	{`x=1`, RuleAssignment},
	{`export FOO=bar`, RuleAssignment},
	{`declare -x A=1`, RuleAssignment},
	{`local x=1`, RuleAssignment},
	{`readonly x`, RuleAssignment},
	// globs, braces, tilde, ANSI-C quoting
	{`ls *`, RuleGlob},
	{`ls *.txt`, RuleGlob},
	{`ls file?`, RuleGlob},
	{`ls [ab]`, RuleGlob},
	{`head -n 1 *`, RuleGlob},
	{`ls @(a|b)`, RuleGlob},
	{`echo {a,b}`, RuleBrace},
	{`echo {1..3}`, RuleBrace},
	{`touch a{b,c}`, RuleBrace},
	{`ls ~`, RuleTilde},
	{`cat ~/.ssh/id_rsa`, RuleTilde},
	{`ls --dir=~/x`, RuleTilde},
	{`echo $'\x41'`, RuleAnsiCQuote},
	{`echo $"hi"`, RuleAnsiCQuote},
	// resolution
	{`definitely-not-a-command-xyz`, RuleNotFound},
	{`/nonexistent/bin/ls`, RuleNotFound},
	{`./missing.sh`, RuleNotFound},
	{`''`, RuleEmpty},
	{``, RuleEmpty},
	{"   \n\t", RuleEmpty},
	{`cd sub && ./run.sh`, RuleRelativeAfterCd},
	// builtins that evaluate or change the shell
	{`eval ls`, RuleBuiltin},
	{`source ./x.sh`, RuleBuiltin},
	{`. ./x.sh`, RuleBuiltin},
	{`builtin echo hi`, RuleBuiltin},
	{`alias ls=rm`, RuleBuiltin},
	{`trap 'ls' EXIT`, RuleBuiltin},
	{`set -x`, RuleBuiltin},
	{`hash -p /tmp/x ls`, RuleBuiltin},
	{`exit 0`, RuleBuiltin},
	{`env eval ls`, RuleBuiltin},
	{`command eval ls`, RuleBuiltin},
	{`bash -c 'source x'`, RuleBuiltin},
	{`cd`, RuleBuiltin},
	{`cd -`, RuleBuiltin},
	{`cd a b`, RuleBuiltin},
	// spoofed wrappers
	{`./sh -c id`, RuleWrapperSpoof},
	{`./bash -c id`, RuleWrapperSpoof},
	{`bin/env ls`, RuleWrapperSpoof},
	{`../nohup ls`, RuleWrapperSpoof},
	{`nohup ./sh -c id`, RuleWrapperSpoof},
	{`/usr/bin/env ./bash -c id`, RuleWrapperSpoof},
	{`{evil}/sh -c id`, RuleWrapperSpoof},
	{`{evil}/env ls`, RuleWrapperSpoof},
	// carriers
	{`xargs rm`, RuleCarrier},
	{`ls | xargs rm -rf`, RuleCarrier},
	{`busybox sh -c id`, RuleCarrier},
	{`setsid ls`, RuleCarrier},
	{`env xargs ls`, RuleCarrier},
	{`bash -c 'xargs ls'`, RuleCarrier},
	{`fish -c ls`, RuleCarrier},
	// wrapper options
	{`bash -i -c ls`, RuleWrapperOption},
	{`bash -s`, RuleWrapperOption},
	{`bash --rcfile x -c ls`, RuleWrapperOption},
	{`bash -O extglob -c ls`, RuleWrapperOption},
	{`sh -k -c ls`, RuleWrapperOption},
	{`bash --log -c ls`, RuleWrapperOption},
	{`env -C /tmp ls`, RuleWrapperOption},
	{`env --chdir=/tmp ls`, RuleWrapperOption},
	{`env --split 'ls'`, RuleWrapperOption},
	{`env -S 'ls; id'`, RuleWrapperOption},
	{`env -S 'ls | id'`, RuleWrapperOption},
	{`env -S 'ls ${HOME}'`, RuleWrapperOption},
	{`env -S 'ls \_x'`, RuleWrapperOption},
	{`env -S 'ls #x'`, RuleWrapperOption},
	{`env -a x ls`, RuleWrapperOption},
	{`timeout`, RuleWrapperOption},
	{`timeout 5`, RuleWrapperOption},
	{`timeout --sig=KILL 5 ls`, RuleWrapperOption},
	{`nohup`, RuleWrapperOption},
	{`nohup -x ls`, RuleWrapperOption},
	{`stdbuf -x ls`, RuleWrapperOption},
	{`exec`, RuleWrapperOption},
	{`command -v ls`, RuleWrapperOption},
	{`exec -a`, RuleWrapperOption},
	{`sudo -s`, RuleWrapperOption},
	{`sudo -i`, RuleWrapperOption},
	{`sudo -e /etc/x`, RuleWrapperOption},
	{`sudo --shell`, RuleWrapperOption},
	{`sudo -D /tmp ls`, RuleWrapperOption},
	// shells without -c
	{`bash`, RuleShellNoCommand},
	{`sh script.sh`, RuleShellNoCommand},
	{`bash -l`, RuleShellNoCommand},
	{`cat x | sh`, RuleShellNoCommand},
	{`bash -c`, RuleShellNoCommand},
	{`bash -c ''`, RuleEmpty},
	// blocked environment through wrappers
	{`env LD_PRELOAD=/tmp/malware.so ls`, RuleEnvBlocked},
	{`env BASH_ENV=/tmp/x bash -lc 'echo SAFE'`, RuleEnvBlocked},
	{`/usr/bin/env NODE_OPTIONS=--require=x node`, RuleEnvBlocked},
	{`env GLIBC_TUNABLES=x ls`, RuleEnvBlocked},
	{`env JAVA_TOOL_OPTIONS=x ls`, RuleEnvBlocked},
	{`env GIT_SSH_COMMAND=evil.sh git fetch`, RuleEnvBlocked},
	{`env PATH=/tmp ls`, RuleEnvBlocked},
	{`env -S 'LD_PRELOAD=/x ls'`, RuleEnvBlocked},
	{`env 'BASH_FUNC_ls%%=() { id; }' bash -c ls`, RuleEnvBlocked},
	{`sudo LD_PRELOAD=x ls`, RuleEnvBlocked},
	{`timeout 5 env BASH_ENV=x bash -c ls`, RuleEnvBlocked},
	{`env ld_preload=/x ls`, RuleEnvBlocked},
	{`env Path=/tmp ls`, RuleEnvBlocked},
	{`env CDPATH=/etc ls`, RuleEnvBlocked},
	{`env =x ls`, RuleGlob},
	{`env 1X=y ls`, RuleEnvBlocked},
	// odd syntax from other shells
	{`cat =(id)`, RuleParse},
	{`echo ${ id;}`, RuleSubstitution}, // bash 5.3 / mksh command substitution
	{`echo ${|id;}`, RuleSubstitution},
	{`echo =cmd`, RuleGlob},
}

func TestCorpus(t *testing.T) {
	h := newHost(t)
	if len(corpus) < 150 {
		t.Fatalf("corpus has %d lines, want >= 150", len(corpus))
	}
	accepted, refused := 0, 0
	for _, tc := range corpus {
		cmd := h.expand(tc.cmd)
		a := Analyze(cmd, h.env)
		if tc.rule == "" {
			accepted++
			if !a.OK {
				t.Errorf("%q: refused (%s), want accepted\n%s", tc.cmd, a.Reason, a.Explain())
				continue
			}
			if a.Rebuilt == "" || len(a.Segments) == 0 {
				t.Errorf("%q: accepted without segments or rebuilt command", tc.cmd)
			}
			for _, s := range a.Segments {
				if !s.Builtin && (s.Path == "" || s.Resolved == "" || s.Path[0] != '/' || s.Resolved[0] != '/') {
					t.Errorf("%q: segment %d not resolved to an absolute path: %+v", tc.cmd, s.Index, s)
				}
			}
			continue
		}
		refused++
		if a.OK {
			t.Errorf("%q: accepted, want refused by %s\n%s", tc.cmd, tc.rule, a.Explain())
			continue
		}
		if a.Rule != tc.rule {
			t.Errorf("%q: refused by %s (%s), want %s", tc.cmd, a.Rule, a.Reason, tc.rule)
		}
		if a.Reason == "" || !strings.Contains(a.Reason, string(a.Rule)) {
			t.Errorf("%q: reason %q does not name the rule", tc.cmd, a.Reason)
		}
		if a.Rebuilt != "" {
			t.Errorf("%q: refused analysis has a rebuilt command", tc.cmd)
		}
	}
	t.Logf("corpus: %d lines, %d accepted, %d refused", len(corpus), accepted, refused)
}
