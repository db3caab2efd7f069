package sessions

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Word lists for session ids. Read-only.
var (
	idAdjectives = []string{
		"amber", "bold", "brave", "brisk", "calm", "clever", "cosy", "crisp", "dapper", "eager",
		"fair", "fast", "fond", "gentle", "glad", "grand", "happy", "hardy", "jolly", "keen",
		"kind", "lively", "lucky", "mellow", "merry", "mild", "neat", "nimble", "noble", "plucky",
		"polite", "proud", "quick", "quiet", "rapid", "sharp", "shy", "sleek", "smooth", "snappy",
		"steady", "sunny", "swift", "tidy", "tender", "vivid", "warm", "wise", "witty", "zesty",
	}
	idNouns = []string{
		"otter", "falcon", "badger", "heron", "lynx", "marten", "panda", "raven", "robin", "salmon",
		"beaver", "bison", "camel", "cobra", "coral", "crane", "dingo", "eagle", "ferret", "finch",
		"gecko", "hare", "ibis", "jackal", "koala", "lemur", "llama", "magpie", "mole", "newt",
		"ocelot", "owl", "pelican", "puffin", "quail", "seal", "shrew", "sparrow", "stoat", "swan",
		"tapir", "tern", "toad", "trout", "viper", "walrus", "wombat", "wren", "yak", "zebra",
	}
)

// newID returns a readable slug (adjective-noun) that taken() rejects not:
// the slug itself, then slug-2 .. slug-12, then slug plus a random suffix.
func newID(taken func(string) bool) string {
	base := idAdjectives[rand.IntN(len(idAdjectives))] + "-" + idNouns[rand.IntN(len(idNouns))]
	if !taken(base) {
		return base
	}
	for i := 2; i <= 12; i++ {
		if id := fmt.Sprintf("%s-%d", base, i); !taken(id) {
			return id
		}
	}
	for {
		if id := fmt.Sprintf("%s-%06x", base, rand.Uint32()&0xffffff); !taken(id) {
			return id
		}
	}
}

// scopeKey is the registry scope of a caller: the pair (agentId,
// sessionKey), so that two agents that use the same session key never see
// each other's sessions, and a sessionKey and an agentId with the same
// value stay apart. Both parts are quoted, which makes the pair
// unambiguous whatever characters they hold; no agent and no key is the
// default scope.
func scopeKey(agentID, sessionKey string) string {
	return strconv.Quote(agentID) + "/" + strconv.Quote(sessionKey)
}

const maxNameChars = 48

// deriveName is the short label `process list` shows: the command's verb plus
// its first non-flag argument, middle-truncated to 48 characters. Leading
// VAR=value assignments are skipped and the verb is shown by its base name.
func deriveName(command string) string {
	fields := strings.Fields(command)
	for len(fields) > 1 && isAssignment(fields[0]) {
		fields = fields[1:]
	}
	if len(fields) == 0 {
		return ""
	}
	verb := path.Base(unquote(fields[0]))
	name := verb
	for _, f := range fields[1:] {
		f = unquote(f)
		if f == "" || strings.HasPrefix(f, "-") {
			continue
		}
		name = verb + " " + f
		break
	}
	return truncateMiddle(name, maxNameChars)
}

func isAssignment(s string) bool {
	i := strings.IndexByte(s, '=')
	if i <= 0 {
		return false
	}
	for j, c := range s[:i] {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || j > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func unquote(s string) string {
	return strings.Trim(s, `"'`)
}

// truncateMiddle shortens s to max runes by replacing its middle with "…".
func truncateMiddle(s string, max int) string {
	r := []rune(s)
	if len(r) <= max || max < 3 {
		return s
	}
	head := (max - 1) / 2
	tail := max - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// lastChars returns the last n runes of s.
func lastChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[len(r)-n:])
}
