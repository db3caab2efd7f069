package envguard

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Rule names the rule that refused a key. Its value is a short stable token
// (for logs and JSON); RefusedError.Error spells it out in plain words.
type Rule string

// The rules of the env policy.
const (
	// RuleInvalidKey: the key does not match ^[A-Za-z_][A-Za-z0-9_]*$.
	RuleInvalidKey Rule = "invalid-key"
	// RuleInvalidValue: the value contains a NUL byte, which no process
	// environment can carry.
	RuleInvalidValue Rule = "invalid-value"
	// RuleBlocked: the exact key is blocked everywhere.
	RuleBlocked Rule = "blocked"
	// RuleBlockedPrefix: the key starts with a prefix blocked everywhere (or
	// matches the CARGO_TARGET_<triple>_(LINKER|RUNNER) pattern).
	RuleBlockedPrefix Rule = "blocked-prefix"
	// RuleBlockedSuffix: the key ends in a suffix that says it holds a
	// command (_COMMAND, _PAGER, _EDITOR, _ASKPASS, _RSH, _SSH).
	RuleBlockedSuffix Rule = "blocked-suffix"
	// RuleBlockedFamily: the key belongs to the variable family of a
	// program that reads its variables as options, commands or
	// configuration, and is not one of the family's data members.
	RuleBlockedFamily Rule = "blocked-family"
	// RuleOverrideOnly: the exact key may not be set by a request.
	RuleOverrideOnly Rule = "override-only"
	// RuleOverrideOnlyPrefix: the key starts with a prefix that a request
	// may not set.
	RuleOverrideOnlyPrefix Rule = "override-only-prefix"
	// RulePathOverride: a request tried to set PATH on the gateway or a node.
	RulePathOverride Rule = "path-override"
	// RuleCredential: a sandbox config env key looks like a credential.
	RuleCredential Rule = "credential"
)

// DefaultSandboxPath is PATH inside a sandbox container, and the fallback
// BuildPath returns when it is left with no usable entry.
const DefaultSandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ErrRefused is matched (errors.Is) by every *RefusedError.
var ErrRefused = errors.New("env refused")

// RefusedError reports one refused environment key.
type RefusedError struct {
	// Key is the key as given (not upper-cased).
	Key string
	// Rule is the rule that refused it.
	Rule Rule
	// Detail says why the rule exists for this key, e.g. "loader and
	// interpreter hooks can run code".
	Detail string
	// Match is the list entry that matched when it is not the key itself:
	// the prefix ("LD_"), the pattern, or the credential suffix ("_TOKEN").
	Match string
}

// Error names the key and the rule in plain words, e.g.
//
//	env LD_PRELOAD refused: blocked everywhere (prefix LD_): loader and interpreter hooks can run code
func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("env ")
	if validKey(e.Key) {
		b.WriteString(e.Key)
	} else {
		fmt.Fprintf(&b, "%q", e.Key)
	}
	b.WriteString(" refused: ")
	b.WriteString(e.Rule.words())
	if e.Match != "" {
		switch {
		case e.Rule == RuleCredential || e.Rule == RuleBlockedSuffix:
			fmt.Fprintf(&b, " (suffix %s)", e.Match)
		case e.Rule == RuleBlockedFamily:
			fmt.Fprintf(&b, " (family %s*)", e.Match)
		case strings.Contains(e.Match, "<"):
			fmt.Fprintf(&b, " (pattern %s)", e.Match)
		default:
			fmt.Fprintf(&b, " (prefix %s)", e.Match)
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrRefused) true for every *RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func (r Rule) words() string {
	switch r {
	case RuleInvalidKey:
		return "invalid key"
	case RuleInvalidValue:
		return "invalid value"
	case RuleBlocked, RuleBlockedPrefix, RuleBlockedSuffix, RuleBlockedFamily:
		return "blocked everywhere"
	case RuleOverrideOnly, RuleOverrideOnlyPrefix:
		return "may not be set by a request on this host"
	case RulePathOverride:
		return "PATH may not be set by a request on this host"
	case RuleCredential:
		return "looks like a credential"
	default:
		return string(r)
	}
}

// validKey reports whether key matches ^[A-Za-z_][A-Za-z0-9_]*$.
func validKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidateKey returns nil if key matches ^[A-Za-z_][A-Za-z0-9_]*$, else a
// *RefusedError with RuleInvalidKey. Only ASCII letters, digits and '_' are
// accepted: '=' would split the entry, '-' and non-ASCII letters are not
// portable shell names.
func ValidateKey(key string) error {
	if validKey(key) {
		return nil
	}
	detail := "must match ^[A-Za-z_][A-Za-z0-9_]*$"
	if key == "" {
		detail = "empty key; " + detail
	}
	return &RefusedError{Key: key, Rule: RuleInvalidKey, Detail: detail}
}

// classifyBlocked returns the refusal of a valid key under the blocked-everywhere
// lists, or nil. Matching ignores case: on Linux the loader only reads
// LD_PRELOAD, but Windows node hosts treat keys case-insensitively and some
// tools read lower-case variants (curl's http_proxy), and refusing ld_preload
// costs nothing.
func classifyBlocked(key, upper string) *RefusedError {
	if reason, ok := blockedEverywhere()[upper]; ok {
		return &RefusedError{Key: key, Rule: RuleBlocked, Detail: reason}
	}
	for _, p := range blockedEverywherePrefixes {
		if strings.HasPrefix(upper, p.prefix) {
			return &RefusedError{Key: key, Rule: RuleBlockedPrefix, Detail: p.reason, Match: p.prefix}
		}
	}
	for _, p := range blockedEverywhereSuffixes {
		if strings.HasSuffix(upper, p.prefix) {
			return &RefusedError{Key: key, Rule: RuleBlockedSuffix, Detail: p.reason, Match: p.prefix}
		}
	}
	if matchCargoTarget(upper) {
		return &RefusedError{Key: key, Rule: RuleBlockedPrefix, Detail: cargoTargetReason, Match: cargoTargetPattern}
	}
	// The rules by name and family yield to the override-only lists: an
	// operator's inherited CURL_HOME or AWS_CONFIG_FILE stays (a request
	// still may not set it).
	if classifyOverride(key, upper) != nil {
		return nil
	}
	for _, p := range blockedEverywhereNameSuffixes {
		if strings.HasSuffix(upper, p.prefix) {
			return &RefusedError{Key: key, Rule: RuleBlockedSuffix, Detail: p.reason, Match: p.prefix}
		}
	}
	return classifyFamily(key, upper)
}

// classifyFamily refuses a key of a program's variable family (families)
// that is not one of the family's allowed data members.
func classifyFamily(key, upper string) *RefusedError {
	for _, f := range families {
		for _, p := range f.prefixes {
			if !strings.HasPrefix(upper, p) || slices.Contains(f.allow, upper) {
				continue
			}
			detail := f.program + " reads these variables as options, commands or configuration"
			if len(f.allow) > 0 {
				detail += "; only " + strings.Join(f.allow, ", ") + " are accepted"
			}
			return &RefusedError{Key: key, Rule: RuleBlockedFamily, Detail: detail, Match: p}
		}
	}
	return nil
}

func classifyOverride(key, upper string) *RefusedError {
	if reason, ok := overrideOnly()[upper]; ok {
		return &RefusedError{Key: key, Rule: RuleOverrideOnly, Detail: reason}
	}
	for _, p := range overrideOnlyPrefixes {
		if strings.HasPrefix(upper, p.prefix) {
			return &RefusedError{Key: key, Rule: RuleOverrideOnlyPrefix, Detail: p.reason, Match: p.prefix}
		}
	}
	return nil
}

// Pinned returns the variables every gateway and node command gets whatever
// was inherited (LESSSECURE=1, PAGER=/bin/cat, EDITOR, VISUAL and GIT_EDITOR
// =/bin/false: no interactive pager or editor whose shell escapes an agent
// could type; see lists.go). A request may not change or unset them. It
// returns a fresh map.
func Pinned() map[string]string { return maps.Clone(pinned) }

// IsPinned reports whether key (any case) is one of Pinned's.
func IsPinned(key string) bool {
	_, ok := pinned[strings.ToUpper(key)]
	return ok
}

// IsBlockedEverywhere reports whether key is invalid or on the
// blocked-everywhere lists (exact keys or prefixes): such a key is dropped
// from the inherited environment and refused in requests on the gateway and
// node hosts.
func IsBlockedEverywhere(key string) bool {
	return !validKey(key) || classifyBlocked(key, strings.ToUpper(key)) != nil
}

// CheckKey checks one request key for host and returns its refusal or nil.
// See CheckRequest.
func CheckKey(host vocab.Host, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if host == vocab.HostSandbox {
		return nil
	}
	upper := strings.ToUpper(key)
	if upper == "PATH" {
		return &RefusedError{Key: key, Rule: RulePathOverride,
			Detail: "the host builds PATH from the login shell PATH and pathPrepend"}
	}
	if r := classifyBlocked(key, upper); r != nil {
		return r
	}
	if r := classifyOverride(key, upper); r != nil {
		return r
	}
	return nil
}

// CheckRequest checks the env of an exec request for host.
//
// On vocab.HostSandbox only key validity (and NUL-free values) is checked: the
// container is the boundary and the host env is never inherited there. Every
// other host value — vocab.HostGateway, vocab.HostNode, and any unknown host, which fails
// closed — additionally refuses PATH, the blocked-everywhere keys and
// prefixes, suffixes and the CARGO_TARGET_<triple>_(LINKER|RUNNER) pattern,
// and the override-only keys and prefixes. List matching ignores case,
// so Path, ld_preload and http_proxy are refused as well.
//
// A Pinned variable set to exactly its pinned value (LESSSECURE=1) is
// accepted: it changes nothing, and `env -i` lines are rebuilt with it.
//
// Keys are checked in sorted order and every refusal is reported: with one
// refusal the result is that *RefusedError itself, with several it is their
// errors.Join in key order. errors.Is(err, ErrRefused) and
// errors.As(err, **RefusedError) (which finds the first) work in both cases.
func CheckRequest(host vocab.Host, env map[string]string) error {
	var errs []error
	for _, k := range sortedKeys(env) {
		if v, ok := pinned[k]; ok && env[k] == v && host != vocab.HostSandbox {
			continue // setting a pinned variable to its pinned value changes nothing
		}
		if err := CheckKey(host, k); err != nil {
			errs = append(errs, err)
			continue
		}
		if strings.IndexByte(env[k], 0) >= 0 {
			errs = append(errs, &RefusedError{Key: k, Rule: RuleInvalidValue, Detail: "the value contains a NUL byte"})
		}
	}
	return joinRefusals(errs)
}

// LooksLikeCredential reports whether key names a secret: it ends in
// _API_KEY, _TOKEN, _PASSWORD, _PRIVATE_KEY, _SECRET, _SECRET_KEY or
// _SECRET_ACCESS_KEY, or is one of those words bare (API_KEY, TOKEN, ...).
// Case is ignored. Keys that merely point at a secret (…_TOKEN_FILE) do not
// count.
func LooksLikeCredential(key string) bool {
	_, ok := credentialMatch(key)
	return ok
}

func credentialMatch(key string) (string, bool) {
	upper := strings.ToUpper(key)
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(upper, s) || upper == s[1:] {
			return s, true
		}
	}
	return "", false
}

// CheckSandboxConfigEnv checks the env of a sandbox's docker configuration
// (baked into the container for its whole life and visible in `docker
// inspect`): invalid keys (RuleInvalidKey), credential-looking keys
// (RuleCredential) and NUL bytes in values (RuleInvalidValue) are refused.
// Reporting follows CheckRequest: sorted keys, every refusal, one error
// returned as is, several joined.
func CheckSandboxConfigEnv(env map[string]string) error {
	var errs []error
	for _, k := range sortedKeys(env) {
		if err := ValidateKey(k); err != nil {
			errs = append(errs, err)
			continue
		}
		if s, ok := credentialMatch(k); ok {
			errs = append(errs, &RefusedError{Key: k, Rule: RuleCredential, Match: s,
				Detail: "secrets in the sandbox config are visible to docker inspect; pass them per request"})
			continue
		}
		if strings.IndexByte(env[k], 0) >= 0 {
			errs = append(errs, &RefusedError{Key: k, Rule: RuleInvalidValue, Detail: "the value contains a NUL byte"})
		}
	}
	return joinRefusals(errs)
}

func joinRefusals(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	default:
		return errors.Join(errs...)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
