// Package sandbox owns the per-agent Docker containers of sandboxctl, created
// through the Engine API (github.com/moby/moby/client, negotiating down to API
// 1.41): scope keys and names, labels, the config hash, ensure (create, start,
// reuse, recreate with the five-minute rule, one container per scope under
// concurrency), the hardening defaults (no capabilities, read-only root,
// no network, a sandbox identity of its own or a non-root user (identity.go),
// memory/CPU/pids limits, sized tmpfs mounts),
// the refusal of configs that weaken them unless named under
// sandbox.docker.unsafe, bind and env validation, prune, explain, and the
// two exec paths:
//
//   - the supervisor path (the default): the container's main process is
//     sandboxctl-supervisor (package supervisor), delivered in a derived image
//     built through the Engine's build API; commands, stdin, resizes and
//     signals travel over the attach stream of that process (see
//     supervisor's package doc for the protocol). The supervisor is pid 1,
//     so no process of the sandbox can reach that stream. Sessions survive
//     a restart of the daemon (Sessions, Reattach; each adopted by the
//     owner the container's labels name) and input waits are reported.
//   - the plain path: one Engine exec per command with attach, demultiplexed
//     output, stdin with EOF, TTY resize, and a kill of the whole in-container
//     tree by its SANDBOXCTL_RUN tag. It is used when the supervisor binary is
//     missing or cannot start (with a warning), when DisableSupervisor is set,
//     and for `sandboxctl sandbox shell`.
//
// Around them: the OCI runtime (sandbox.docker.runtime: runc, or runsc =
// gVisor, where the supervisor is reached over the attach stream only and
// input waits are not detected; runtime.go), the warm pool of started
// sandboxes taken by new scopes (sandbox.pool.size; pool.go), idle pausing
// (sandbox.pauseAfterMinutes; pause.go), and the closing of supervisor
// connections that follow nothing (Options.SupervisorIdleClose), so the
// daemon keeps no goroutine per idle sandbox.
//
// The Engine's container list, filtered by the sandboxctl.managed label, is
// the source of truth for which sandboxes exist; last-used times live in the
// state directory, and so do the owners of sandboxes taken from the pool
// (pool-claims.json: labels cannot change after creation).
//
// With several Engines (sandbox.engines; engines.go, placement.go) the
// Manager NewManager returns places and routes: each Engine has a member
// Manager of its own, pinged and followed for health, and a new sandbox
// goes to the healthy Engine with the most free capacity.
package sandbox
