// Package workdir owns working-directory resolution: host paths (absolute or
// relative to the configured cwd, falling back with a warning), the mapping of
// host paths inside an agent workspace to container paths under /workspace
// (or /agent for read-only access), and the refusal of ".." escapes and of
// symlink components that leave the workspace. It also answers whether a path
// lies outside the workspace, for the external-directory check.
//
// Std only. The functions read the filesystem (Stat, Lstat, Readlink) but
// never write it. Two notions of a path are used on purpose:
//
//   - ResolveHost and ToSandbox clean the requested path lexically first
//     ("a/link/.." is "a") and hand that cleaned path on, so the process
//     runs exactly where the check looked.
//   - IsOutside checks a path a command will use as written, so it walks it
//     as the kernel does: symlinks of existing components are followed and
//     ".." after a symlink is the parent of the symlink's target. A missing
//     tail is joined lexically.
//
// ContainsPath is the lexical "at or under" test everything else builds on.
package workdir
