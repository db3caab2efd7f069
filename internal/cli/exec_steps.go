package cli

import (
	"context"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// stepLabels are the progress lines of the daemon's "step" events.
var stepLabels = map[string]string{
	"image-build":    "building the sandbox image",
	"sandbox-create": "creating the sandbox",
}

// followSteps shows the daemon's steps for p's scope (image build,
// sandbox creation) as progress while the exec request runs; the returned
// func stops. It does nothing when progress is not shown (stderr is not a
// terminal) or the event stream cannot be opened.
func followSteps(ctx context.Context, c *CLI, client *apiclient.Client, p api.ExecParams) (stop func()) {
	prog := c.stepProgress()
	if !prog.enabled() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	// Opened before the exec request: the stream starts at the journal's
	// end, so no step of this exec is missed.
	es, err := client.Events(ctx)
	if err != nil {
		cancel()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ends := map[string]func(){}
		defer func() {
			for _, end := range ends {
				end()
			}
		}()
		for {
			var ev api.Event
			if es.Next(&ev) != nil {
				return
			}
			if ev.Type != vocab.EventStep || ev.AgentID != p.AgentID || ev.SessionKey != p.SessionKey {
				continue
			}
			step := ev.Details.Step
			label, ok := stepLabels[step]
			if !ok {
				continue
			}
			switch ev.Details.Phase {
			case "start":
				if ends[step] == nil {
					ends[step] = prog.step(label)
				}
			case "end":
				if end := ends[step]; end != nil {
					end()
					delete(ends, step)
				}
			}
		}
	}()
	return func() {
		cancel()
		_ = es.Close()
		<-done
	}
}
