package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// ErrContainerGone is wrapped by the error a command fails with when its
// sandbox's container died or was removed while it ran; it matches
// hostapi.ErrEnded too.
var ErrContainerGone error = endedError("sandbox container gone")

// endedError is an error whose text is its own and that matches
// hostapi.ErrEnded.
type endedError string

func (e endedError) Error() string        { return string(e) }
func (e endedError) Is(target error) bool { return target == hostapi.ErrEnded }

// containerWatch follows the Engine's event stream for this Manager's
// sandboxes: one goroutine per Manager, whatever the number of sandboxes.
// When a container dies or is removed, the supervisor connection to it
// ends at once with the reason, so every command it followed fails instead
// of staying "running".
type containerWatch struct {
	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	oom map[string]bool // containers with an "oom" event before their "die"
}

// watchEventsRetry bounds the pause between attempts to re-open the event
// stream (the Engine restarting, say).
const watchEventsRetry = 2 * time.Second

// startWatch starts the follower once; Close stops it.
func (m *DockerEngine) startWatch() {
	m.watch.once.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		m.watch.cancel, m.watch.done = cancel, make(chan struct{})
		go func() {
			defer close(m.watch.done)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); m.releaseIdleLoop(ctx) }()
			go func() { defer wg.Done(); m.pauseLoop(ctx) }()
			m.followEvents(ctx)
			wg.Wait()
		}()
	})
}

// stopWatch ends the follower and waits for it.
func (m *DockerEngine) stopWatch() {
	m.watch.once.Do(func() {}) // no follower may start after Close
	if m.watch.cancel != nil {
		m.watch.cancel()
		<-m.watch.done
	}
}

// followEvents reads the event stream until ctx ends, re-opening it after
// an error. Each (re)open first settles the sandboxes it has connections
// to, since events of an Engine that restarted meanwhile are lost.
func (m *DockerEngine) followEvents(ctx context.Context) {
	backoff := 100 * time.Millisecond
	since := time.Now()
	for ctx.Err() == nil {
		f := m.ownFilter().Add("type", string(events.ContainerEventType)).
			Add("event", string(events.ActionDie), string(events.ActionOOM), string(events.ActionDestroy))
		sctx, cancel := context.WithCancel(ctx)
		res := m.cli.Events(sctx, client.EventsListOptions{Filters: f, Since: unixNanoString(since)})
		m.reconcile(ctx)
		err := m.readEvents(sctx, res, &since, &backoff)
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.logf("sandbox events: %v; re-opening in %s", err, backoff)
		if m.eventsBroken != nil {
			m.eventsBroken(err) // a multi-Engine Manager checks the Engine at once
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchEventsRetry)
	}
}

func (m *DockerEngine) readEvents(ctx context.Context, res client.EventsResult, since *time.Time, backoff *time.Duration) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-res.Err:
			if err == nil {
				err = errors.New("event stream ended")
			}
			return err
		case ev := <-res.Messages:
			*backoff = 100 * time.Millisecond
			at := time.Unix(0, ev.TimeNano)
			if ev.TimeNano == 0 {
				at = time.Unix(ev.Time, 0)
			}
			if at.After(*since) {
				*since = at
			}
			m.onEvent(ctx, ev, at)
		}
	}
}

func unixNanoString(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

// onEvent fails the supervisor connection of a container that died or was
// removed, naming what happened.
func (m *DockerEngine) onEvent(ctx context.Context, ev events.Message, at time.Time) {
	id := ev.Actor.ID
	name := ev.Actor.Attributes["name"]
	if name == "" {
		name = short(id)
	}
	switch ev.Action {
	case events.ActionOOM:
		m.watch.mu.Lock()
		if m.watch.oom == nil {
			m.watch.oom = map[string]bool{}
		}
		m.watch.oom[id] = true
		m.watch.mu.Unlock()
	case events.ActionDie:
		m.watch.mu.Lock()
		oom := m.watch.oom[id]
		delete(m.watch.oom, id)
		m.watch.mu.Unlock()
		code := ev.Actor.Attributes["exitCode"]
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		insp, err := m.cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{})
		cancel()
		switch {
		case isNotFound(err):
			// docker rm -f: the destroy event follows.
			m.containerDied(id, at, fmt.Errorf("%w: sandbox container %s was removed (exit code %s)", ErrContainerGone, name, code), false)
			return
		case err == nil && insp.Container.State != nil:
			oom = oom || insp.Container.State.OOMKilled
		}
		m.containerDied(id, at, dieReason(name, code, oom), oom)
	case events.ActionPause:
		// Paused by another process (sandboxctl sandbox pause): the next
		// command goes through Ensure, which sees it.
		m.warm.forgetID(id)
	case events.ActionDestroy:
		m.containerDied(id, at, fmt.Errorf("%w: sandbox container %s was removed", ErrContainerGone, name), false)
		m.forgetContainer(id)
	}
}

func dieReason(name, code string, oom bool) error {
	what := "exited"
	if code != "" {
		what += " with exit code " + code
		if n, err := strconv.Atoi(code); err == nil && n > 128 && n < 128+65 {
			what += fmt.Sprintf(" (signal %d)", n-128)
		}
	}
	if oom {
		what += ", OOMKilled: the sandbox ran out of memory"
	}
	return fmt.Errorf("%w: sandbox container %s %s", ErrContainerGone, name, what)
}

// containerDied ends the supervisor connection of container id that was
// made before the event (a connection made after it, to the container
// started again, is left alone). A container that stops or is removed is
// the usual end of a sandbox (a debug line); one the kernel killed for
// memory (oom) is a warning.
func (m *DockerEngine) containerDied(id string, at time.Time, reason error, oom bool) {
	m.warm.forgetID(id)
	if m.clients.fail(id, at, reason) {
		if oom {
			m.logf("warning: sandbox %s: %v", short(id), reason)
			return
		}
		m.logf("debug: sandbox %s: container stopped; its supervisor connection is closed (%v)", short(id), reason)
	}
}

// forgetContainer drops what the Manager keeps about a removed container.
func (m *DockerEngine) forgetContainer(id string) {
	m.clients.drop(id)
	m.clients.mu.Lock()
	delete(m.clients.localBad, id)
	delete(m.clients.inits, id)
	m.clients.mu.Unlock()
	m.watch.mu.Lock()
	delete(m.watch.oom, id)
	m.watch.mu.Unlock()
}

// reconcile checks every container the Manager holds a connection to: one
// that is gone or not running (its events were lost, e.g. the Engine
// restarted) fails its connection.
func (m *DockerEngine) reconcile(ctx context.Context) {
	for _, id := range m.clients.ids() {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		insp, err := m.cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{})
		cancel()
		switch {
		case isNotFound(err):
			m.containerDied(id, time.Now(), fmt.Errorf("%w: sandbox container %s was removed", ErrContainerGone, short(id)), false)
			m.forgetContainer(id)
		case err != nil:
			// The Engine does not answer: the stream re-opens later and
			// settles then.
		case insp.Container.State == nil || !insp.Container.State.Running:
			st := insp.Container.State
			code, oom := "", false
			if st != nil {
				code, oom = strconv.Itoa(st.ExitCode), st.OOMKilled
			}
			at := time.Now()
			if st != nil {
				if fin, perr := time.Parse(time.RFC3339Nano, st.FinishedAt); perr == nil && !fin.IsZero() {
					at = fin
				}
			}
			m.containerDied(id, at, dieReason(trimSlash(insp.Container.Name), code, oom), oom)
		}
	}
}
