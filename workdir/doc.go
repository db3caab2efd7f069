// Package workdir owns working-directory resolution: host paths (absolute or
// relative to the configured cwd, falling back with a warning), the mapping of
// host paths inside an agent workspace to container paths under /workspace
// (or /agent for read-only access), and the refusal of ".." escapes and of
// symlink components that leave the workspace. It also answers whether a path
// lies outside the workspace, for the external-directory check.
package workdir
