// Package metrics instruments the exec and process tools for the daemon's
// GET /metrics (Prometheus text format). It wraps whatever serves the tools
// (a sessions.Manager) and owns its own registry: nothing is registered in
// the Prometheus client's global default registry.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// Tools is the tool contract (toolapi.Tools).
type Tools = toolapi.Tools

// Instrumented wraps Tools and records calls, outcomes and latencies.
type Instrumented struct {
	next     Tools
	registry *prometheus.Registry
	execs    *prometheus.CounterVec
	execDur  *prometheus.HistogramVec
	procs    *prometheus.CounterVec
}

// New wraps next. The registry also carries the Go runtime and process
// collectors so daemon memory is visible.
func New(next Tools) *Instrumented {
	reg := prometheus.NewRegistry()
	in := &Instrumented{
		next:     next,
		registry: reg,
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_exec_total",
			Help: "exec tool calls by requested host and result status (error = bad input or failure before a result).",
		}, []string{"host", "status"}),
		execDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxctl_exec_call_seconds",
			Help:    "Time an exec tool call took to answer (up to the yield window for long commands).",
			Buckets: []float64{.002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120},
		}, []string{"host"}),
		procs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_process_total",
			Help: "process tool calls by action and outcome.",
		}, []string{"action", "outcome"}),
	}
	reg.MustRegister(in.execs, in.execDur, in.procs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return in
}

// Exec forwards to the wrapped tools and records the outcome.
func (in *Instrumented) Exec(ctx context.Context, p toolapi.ExecParams) (toolapi.Result, error) {
	start := time.Now()
	res, err := in.next.Exec(ctx, p)
	host := p.Host
	if host == "" {
		host = "default"
	}
	status := "error"
	if err == nil {
		if s, ok := res.Details["status"].(string); ok {
			status = s
		}
	} else if errors.Is(err, toolapi.ErrInvalidInput) {
		status = "invalid"
	}
	in.execs.WithLabelValues(host, status).Inc()
	in.execDur.WithLabelValues(host).Observe(time.Since(start).Seconds())
	return res, err
}

// Process forwards to the wrapped tools and records the outcome.
func (in *Instrumented) Process(ctx context.Context, p toolapi.ProcessParams) (toolapi.Result, error) {
	res, err := in.next.Process(ctx, p)
	outcome := "ok"
	switch {
	case errors.Is(err, toolapi.ErrInvalidInput):
		outcome = "invalid"
	case err != nil:
		outcome = "error"
	case res.Details["error"] == "not_found":
		outcome = "not_found"
	}
	in.procs.WithLabelValues(p.Action, outcome).Inc()
	return res, err
}

// Register adds collectors of other parts of the daemon (the sandbox
// Engines' health) to the registry.
func (in *Instrumented) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := in.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves the registry in the Prometheus text format.
func (in *Instrumented) Handler() http.Handler {
	return promhttp.HandlerFor(in.registry, promhttp.HandlerOpts{Registry: in.registry})
}

// Close closes the wrapped tools when they can be closed (a
// sessions.Manager kills what it started).
func (in *Instrumented) Close(ctx context.Context) error {
	if c, ok := in.next.(interface{ Close(context.Context) error }); ok {
		return c.Close(ctx)
	}
	return nil
}
