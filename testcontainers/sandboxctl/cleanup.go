package sandboxctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// RemoveRun removes every container labelled LabelRun=runID, running or
// not: what Terminate does after the sessions ended. It does not depend on
// the testcontainers reaper (Ryuk), which may be disabled or unreachable.
func RemoveRun(ctx context.Context, cli *client.Client, runID string) error {
	if runID == "" {
		return fmt.Errorf("%w: empty run id", ErrInvalidOption)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelRun+"="+runID)})
	if err != nil {
		return fmt.Errorf("sandboxctl: list the run's containers: %w", err)
	}
	var errs []error
	for _, c := range list.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandboxctl: remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}
