// Package sandboxctl is a testcontainers-go style module for sandboxctl: a
// hardened sandbox for a test, gone when the test ends.
//
//	sb, err := sandboxctl.Run(ctx, sandboxctl.DefaultDaemonImage, sandboxctl.WithTB(t)) // container mode
//	sb, err := inprocess.Run(ctx, sandboxctl.WithTB(t))         // in-process mode
//	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "echo hi > /workspace/out"})
//	rc, err := sb.CopyFileFromContainer(ctx, "/workspace/out")
//
// Run starts what the test needs and returns a *Sandbox with the two tools
// (Exec; Process to poll, log, write to and kill background sessions),
// file copy in and out, Explain, Endpoint (the daemon's URL, token and
// certificate, for the test's own clients) and Terminate. With WithTB,
// Terminate is registered with t.Cleanup. As in testcontainers-go's
// modules, Run takes the daemon image and testcontainers.ContainerCustomizer
// options: this package's Option values and testcontainers-go's generic
// ones, which customise the daemon container. The image is never pulled.
//
// Two modes:
//
//   - Container mode (ContainerMode, the default): the daemon runs in a
//     container of the locally built daemon image (images/build.sh daemon),
//     reached over its TCP listener with a per-run token and TLS
//     certificate. The test links this package, testcontainers-go and the
//     tools' wire types only. The daemon container has the Docker socket
//     mounted (see ContainerMode for what that means).
//   - In-process (package inprocess): a sessions.Manager over the local
//     Engine inside the test process; the fast path.
//
// Every container a run creates (the daemon, the sandboxes) carries the
// testcontainers labels (org.testcontainers=true, org.testcontainers.sessionId,
// …; testcontainers.GenericLabels), LabelRun with the run's id, and the
// WithLabels labels, beside sandboxctl's own (so `sandboxctl sandbox prune`
// and list see them as its sandboxes). Cleanup does not depend on the
// testcontainers reaper: Terminate removes every container with the run's
// label itself.
package sandboxctl
