package hostexec

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/moby/sys/user"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// Identity is the unprivileged uid and gid a root daemon runs gateway
// commands as (Envelope.Identity). Commands get no supplementary groups.
type Identity struct {
	UID, GID int
}

// DefaultIdentity is the identity of gateway commands when the
// configuration names none (hostapi.DefaultGatewayUID, DefaultGatewayGID),
// checked against the account files at start (CheckIdentity).
var DefaultIdentity = Identity{UID: hostapi.DefaultGatewayUID, GID: hostapi.DefaultGatewayGID}

// maxID is the largest uid or gid the kernel takes ((uid_t)-1 means "no
// change" to setresuid).
const maxID = 1<<32 - 2

// IdentityFiles are the account files CheckIdentity reads; tests point
// them at files of their own.
type IdentityFiles struct {
	Passwd, Group, SubUID, SubGID string
}

// SystemIdentityFiles are the host's own account files.
var SystemIdentityFiles = IdentityFiles{Passwd: "/etc/passwd", Group: "/etc/group", SubUID: "/etc/subuid", SubGID: "/etc/subgid"}

// ErrIdentityInUse is returned by CheckIdentity for an identity that an
// account, a group or a subordinate-id range already uses.
var ErrIdentityInUse = errors.New("identity in use")

// CheckIdentity refuses an identity that is root, out of range, or used by
// anything on the host: the uid of an account in passwd, the gid of a group
// or of an account's primary group, a uid or gid inside a subordinate-id
// range (a rootless container of that user could act as it). A command that
// shared its uid with an account could signal, trace or write that
// account's processes and files. Missing subuid/subgid files are fine;
// missing passwd or group files are not (nothing would be checked).
func CheckIdentity(id Identity, files IdentityFiles) error {
	if id.UID <= 0 || id.GID <= 0 || id.UID > maxID || id.GID > maxID {
		return fmt.Errorf("gateway identity %d:%d: uid and gid must be between 1 and %d (never root)", id.UID, id.GID, maxID)
	}
	users, err := user.ParsePasswdFile(files.Passwd)
	if err != nil {
		return fmt.Errorf("gateway identity: %w", err)
	}
	for _, u := range users {
		if u.Uid == id.UID {
			return fmt.Errorf("gateway identity: uid %d is the account %q in %s: %w", id.UID, u.Name, files.Passwd, ErrIdentityInUse)
		}
		if u.Gid == id.GID {
			return fmt.Errorf("gateway identity: gid %d is the primary group of the account %q in %s: %w", id.GID, u.Name, files.Passwd, ErrIdentityInUse)
		}
	}
	groups, err := user.ParseGroupFile(files.Group)
	if err != nil {
		return fmt.Errorf("gateway identity: %w", err)
	}
	for _, g := range groups {
		if g.Gid == id.GID {
			return fmt.Errorf("gateway identity: gid %d is the group %q in %s: %w", id.GID, g.Name, files.Group, ErrIdentityInUse)
		}
	}
	for _, f := range []struct {
		path, what string
		id         int
	}{{files.SubUID, "uid", id.UID}, {files.SubGID, "gid", id.GID}} {
		ranges, err := user.ParseSubIDFile(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("gateway identity: %w", err)
		}
		for _, r := range ranges {
			if int64(f.id) >= r.SubID && int64(f.id) < r.SubID+r.Count {
				return fmt.Errorf("gateway identity: %s %d is in %q's subordinate range %d-%d in %s: %w",
					f.what, f.id, r.Name, r.SubID, r.SubID+r.Count-1, f.path, ErrIdentityInUse)
			}
		}
	}
	return nil
}

// MayWrite reports whether id may create files in the directory fi by its
// mode bits (owner, group, others; ACLs are not read): the gateway's
// workspace must be writable by the identity, or every command there fails.
func (id Identity) MayWrite(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return false
	}
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == id.UID:
		return perm&0o300 == 0o300
	case int(st.Gid) == id.GID:
		return perm&0o030 == 0o030
	}
	return perm&0o003 == 0o003
}
