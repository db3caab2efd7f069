package hostexec

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// Secret locations: paths no gateway command may read, whatever else its
// ruleset grants (issue 25, finding 2: the ruleset granted all of /etc/ssl,
// so a 0600 key under /etc/ssl/private was read, and ~/.config/git, where
// git's credential store keeps passwords).
var (
	// systemSecrets are the host's: password hashes, sudo rules, TLS
	// private keys.
	systemSecrets = []string{
		"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
		"/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd",
		"/etc/ssl/private", "/etc/pki/tls/private",
	}
	// systemSecretGlobs are expanded when the policy is made (SSH host
	// keys; the public halves and ssh_config stay readable).
	systemSecretGlobs = []string{"/etc/ssh/ssh_host_*_key"}
	// homeSecrets are credentials under a home directory.
	homeSecrets = []string{
		".ssh", ".gnupg", ".git-credentials", ".config/git/credentials", ".netrc",
		".aws", ".docker", ".kube", ".config/gh", ".config/gcloud", ".azure",
		".pgpass", ".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml",
		".password-store", ".local/share/keyrings",
	}
)

// DefaultSecrets are the secret locations of a host whose daemon has the
// home directory home ("" = none) and the state directory state ("" =
// none), plus extra (the configuration's own). The state directory holds
// approvals, tokens, other agents' output and the host supervisor's
// socket.
func DefaultSecrets(home, state string, extra ...string) []string {
	out := slices.Clone(systemSecrets)
	for _, g := range systemSecretGlobs {
		m, _ := filepath.Glob(g) // the patterns are constant and valid
		out = append(out, m...)
	}
	if filepath.IsAbs(home) {
		for _, h := range homeSecrets {
			out = append(out, filepath.Join(home, h))
		}
	}
	if filepath.IsAbs(state) {
		out = append(out, filepath.Clean(state))
	}
	return append(out, extra...)
}

// realPath resolves p's symlinks as far as p exists: the deepest existing
// ancestor is resolved and the rest appended. Landlock checks the real
// hierarchy, so secrets and roots are compared as real paths.
func realPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// readableExcept grants reading (and executing) everything under roots
// but the paths in except and what lies under them. Landlock rules only
// grant, and a grant covers a whole hierarchy, so a root that holds an
// excluded path is never granted itself: its entries are, one by one,
// down the path to each excluded one. So an entry created later in such
// a directory stays unreadable, and the directories on the way (/, /etc,
// the home directory) cannot be listed. Symbolic links among those
// entries are not followed: their targets are granted (or not) where
// they really are. Roots that do not exist are left out; a directory that
// cannot be listed is not granted.
func readableExcept(roots, except []string) []landlock.Rule {
	ex := make([]string, 0, len(except))
	for _, e := range except {
		if filepath.IsAbs(e) {
			ex = append(ex, realPath(e))
		}
	}
	var dirs, files []string
	var grant func(p string)
	grant = func(p string) {
		holds := false
		for _, e := range ex {
			if within(p, e) {
				return // excluded itself
			}
			if within(e, p) {
				holds = true
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		if !holds {
			if fi.IsDir() {
				dirs = append(dirs, p)
			} else {
				files = append(files, p)
			}
			return
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return
		}
		for _, en := range entries {
			if en.Type()&fs.ModeSymlink != 0 {
				continue
			}
			grant(filepath.Join(p, en.Name()))
		}
	}
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			continue
		}
		rp, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		grant(rp)
	}
	var rules []landlock.Rule
	if len(dirs) > 0 {
		rules = append(rules, landlock.RODirs(dedupe(dirs)...).IgnoreIfMissing())
	}
	if len(files) > 0 {
		rules = append(rules, landlock.ROFiles(dedupe(files)...).IgnoreIfMissing())
	}
	return rules
}

// dedupe sorts and removes repeated paths.
func dedupe(p []string) []string {
	slices.Sort(p)
	return slices.Compact(p)
}
