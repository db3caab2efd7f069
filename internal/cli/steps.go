package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/moby/term"
)

// progressAfter is how long a step runs before its progress line is shown
// (issue 15: progress for every step over ~1 s).
const progressAfter = time.Second

// stepProgress writes a line on stderr for each step that lasts longer than
// progressAfter, and only when stderr is a terminal: scripts and tools
// that read stderr see nothing extra. Steps nest (the daemon's start
// happens inside the first request): only the innermost running step is
// shown.
type stepProgress struct {
	w     io.Writer // nil: stderr is not a terminal, nothing is shown
	mu    sync.Mutex
	steps []*progressStep // running steps, innermost last
}

type progressStep struct {
	name string
	done chan struct{}
}

// newStepProgress shows progress on stderr when it is a terminal.
func newStepProgress(stderr io.Writer) *stepProgress {
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(f.Fd()) {
		return &stepProgress{w: stderr}
	}
	return &stepProgress{}
}

// enabled reports whether progress is shown.
func (p *stepProgress) enabled() bool { return p != nil && p.w != nil }

// step starts the step name; the returned func ends it.
func (p *stepProgress) step(name string) (end func()) {
	if p == nil || p.w == nil {
		return func() {}
	}
	s := &progressStep{name: name, done: make(chan struct{})}
	p.mu.Lock()
	p.steps = append(p.steps, s)
	p.mu.Unlock()
	go func() {
		t := time.NewTimer(progressAfter)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			p.mu.Lock()
			innermost := len(p.steps) > 0 && p.steps[len(p.steps)-1] == s
			if innermost {
				fmt.Fprintf(p.w, "sandboxctl: %s…\n", s.name)
			}
			p.mu.Unlock()
			if innermost {
				return
			}
			// An inner step runs (and shows itself): count again once
			// this step is the innermost one.
			t.Reset(progressAfter)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			for i, x := range p.steps {
				if x == s {
					p.steps = append(p.steps[:i], p.steps[i+1:]...)
					break
				}
			}
			close(s.done)
			p.mu.Unlock()
		})
	}
}
