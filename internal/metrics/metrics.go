// Package metrics instruments the daemon for its GET /metrics (Prometheus
// text format): the exec and process tools and the commands and approvals
// (as the sessions.Manager's sessions.Observer, so it is no layer on a
// request's path), the sandbox manager (as its sandbox.Observer) and, at
// scrape time, the sandboxes, running sessions and pending approvals. It
// owns its own registry: nothing is registered in the Prometheus client's
// global default registry.
//
// Every label value comes from a fixed set (toolapi's vocabularies, the
// result statuses, sandbox states and engines, Engine error classes), and
// every series of those sets exists from the start at zero; whatever a
// caller sends (an unknown host or action) is counted under "invalid" or
// "other" and never becomes a label value.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
	"runtime"
)

// Label values beyond the vocabularies.
const (
	hostNone     = "none"    // the call failed before a host was chosen
	valueInvalid = "invalid" // bad input
	valueOther   = "other"   // a value outside the fixed set
	valueError   = "error"
)

// execStatuses are the status label values of sandboxctl_exec_total.
var execStatuses = []string{api.StatusCompleted, api.StatusFailed, api.StatusRunning,
	api.StatusApprovalPending, api.StatusDenied, valueInvalid, valueError, valueOther}

// processOutcomes are the outcome label values of sandboxctl_process_total.
var processOutcomes = []string{"ok", "not_found", valueInvalid, valueError}

// fallbackOps are the op label values of supervisor fallbacks.
var fallbackOps = []string{"exec", "files"}

// Sources are read at scrape time; nil ones are not reported.
type Sources struct {
	// Version is the daemon's version, reported by sandboxctl_build_info
	// with the Go version it was built with.
	Version string
	// Sandboxes lists the managed sandboxes.
	Sandboxes func(ctx context.Context) ([]sandbox.Info, error)
	// RunningSessions counts the sessions not yet finished.
	RunningSessions func() int
	// PendingApprovals counts the approval requests awaiting a decision.
	PendingApprovals func(ctx context.Context) (int, error)
}

// Set is the daemon's metrics: its registry and every series. It is the
// sandbox manager's and the sessions manager's Observer (make it before
// them); AddSources adds the scrape-time gauges once their sources exist.
type Set struct {
	registry *prometheus.Registry

	execs       *prometheus.CounterVec
	execDur     *prometheus.HistogramVec
	procs       *prometheus.CounterVec
	outputBytes *prometheus.CounterVec
	fallbacks   *prometheus.CounterVec
	engineErrs  *prometheus.CounterVec
	createDur   prometheus.Histogram
	buildDur    prometheus.Histogram
	commandDur  *prometheus.HistogramVec
	approvals   *prometheus.CounterVec
	approvalDur *prometheus.HistogramVec
	warmPool    *prometheus.CounterVec
	egress      *prometheus.CounterVec
	egressBytes *prometheus.CounterVec
}

var (
	_ sandbox.Observer  = (*Set)(nil)
	_ egress.Observer   = (*Set)(nil)
	_ sessions.Observer = (*Set)(nil)
)

// commandStatuses are the status label values of
// sandboxctl_command_run_seconds.
var commandStatuses = []string{api.StatusCompleted, api.StatusFailed}

// approvalDecisions and approvalDeciders are the label values of the
// approval metrics: the verdict, and who gave it (a human, or askFallback
// when the request expired).
var (
	approvalDecisions = []string{string(vocab.DecisionRun), string(vocab.DecisionDeny)}
	approvalDeciders  = []string{"human", "fallback"}
)

// AddSources adds the scrape-time gauges read from src and the build info.
// Call it once.
func (in *Set) AddSources(src Sources) {
	in.registry.MustRegister(&sourceCollector{src: src})
	version := src.Version
	if version == "" {
		version = "dev"
	}
	in.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sandboxctl_build_info",
		Help:        "Always 1, labelled with the daemon's version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 }))
}

// NewSet makes the registry with every series of the fixed label sets at
// zero. The registry also carries the Go runtime and process collectors so
// daemon memory is visible.
func NewSet() *Set {
	reg := prometheus.NewRegistry()
	hosts := append(slices.Clone(vocab.HostNames()), hostNone)
	in := &Set{
		registry: reg,
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_exec_total",
			Help: "exec tool calls by the host that ran the command (none: failed before one was chosen) and result status (invalid = bad input, error = failure before a result).",
		}, []string{"host", "status"}),
		execDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxctl_exec_call_seconds",
			Help:    "Time an exec tool call took to answer (up to the yield window for long commands), by the host that ran it.",
			Buckets: []float64{.002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120},
		}, []string{"host"}),
		procs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_process_total",
			Help: "process tool calls by action (invalid: not a known action) and outcome.",
		}, []string{"action", "outcome"}),
		outputBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_output_bytes_total",
			Help: "Bytes of command output the tools returned to callers, by tool.",
		}, []string{"tool"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_supervisor_fallbacks_total",
			Help: "Supervised sandboxes reached without their supervisor (plain Engine exec or archive API), by operation.",
		}, []string{"op"}),
		engineErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_engine_errors_total",
			Help: "Failed Docker Engine calls by class.",
		}, []string{"class"}),
		createDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sandboxctl_sandbox_create_seconds",
			Help:    "Time to create and start a sandbox container.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 30, 60},
		}),
		buildDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sandboxctl_image_build_seconds",
			Help:    "Time to build a supervised sandbox image.",
			Buckets: []float64{.5, 1, 2, 5, 10, 30, 60, 120, 300},
		}),
		commandDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxctl_command_run_seconds",
			Help:    "Run time of commands, from the exec call to their end (an approved command's wait for approval included), by host and status (completed, failed).",
			Buckets: []float64{.1, 1, 10, 60, 600, 3600},
		}, []string{"host", "status"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_approval_decisions_total",
			Help: "Decided approval requests of sessions, by decision (run, deny) and by whom (human; fallback: askFallback when the request expired).",
		}, []string{"decision", "by"}),
		approvalDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxctl_approval_decision_seconds",
			Help:    "Time from an approval request to its decision, by decision and by whom.",
			Buckets: []float64{5, 30, 120, 600, 3600},
		}, []string{"decision", "by"}),
		warmPool: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_warm_pool_total",
			Help: "New sandboxes with a warm pool configured, by result: hit (taken from the pool) or miss (created).",
		}, []string{"result"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_egress_decisions_total",
			Help: "Decisions of the sandboxes' egress gateways, by kind (dns, connect, http, tls) and decision (allowed, denied).",
		}, []string{"kind", "decision"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxctl_egress_bytes_total",
			Help: "Bytes through the sandboxes' egress gateways, by direction: out (from a sandbox) or in (to it).",
		}, []string{"direction"}),
	}
	// Every series of the fixed sets exists from the start.
	for _, h := range hosts {
		in.execDur.WithLabelValues(h)
		for _, s := range execStatuses {
			in.execs.WithLabelValues(h, s)
		}
	}
	for _, a := range append(slices.Clone(api.ProcessActions), valueInvalid) {
		for _, o := range processOutcomes {
			in.procs.WithLabelValues(a, o)
		}
	}
	for _, t := range []string{"exec", "process"} {
		in.outputBytes.WithLabelValues(t)
	}
	for _, op := range fallbackOps {
		in.fallbacks.WithLabelValues(op)
	}
	for _, c := range sandbox.EngineErrorClasses {
		in.engineErrs.WithLabelValues(c)
	}
	for _, h := range vocab.HostNames() {
		for _, s := range commandStatuses {
			in.commandDur.WithLabelValues(h, s)
		}
	}
	for _, d := range approvalDecisions {
		for _, by := range approvalDeciders {
			in.approvals.WithLabelValues(d, by)
			in.approvalDur.WithLabelValues(d, by)
		}
	}
	for _, r := range []string{"hit", "miss"} {
		in.warmPool.WithLabelValues(r)
	}
	for _, k := range egressKinds {
		for _, d := range []string{"allowed", "denied"} {
			in.egress.WithLabelValues(k, d)
		}
	}
	for _, d := range []string{"out", "in"} {
		in.egressBytes.WithLabelValues(d)
	}
	reg.MustRegister(in.execs, in.execDur, in.procs, in.outputBytes, in.fallbacks, in.engineErrs, in.createDur, in.buildDur,
		in.commandDur, in.approvals, in.approvalDur, in.warmPool, in.egress, in.egressBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return in
}

// oneOf returns v when it is in set, else other.
func oneOf(v string, set []string, other string) string {
	if slices.Contains(set, v) {
		return v
	}
	return other
}

// ExecAnswered counts one exec call that answered res, err after took
// (sessions.Observer).
func (in *Set) ExecAnswered(res api.Result, err error, took time.Duration) {
	host := hostNone
	status := valueError
	if err == nil {
		// The host that ran it, as the result reports it.
		host = oneOf(res.Details.Host, vocab.HostNames(), hostNone)
		status = oneOf(res.Details.Status, execStatuses, valueOther)
		in.outputBytes.WithLabelValues("exec").Add(float64(textBytes(res)))
	} else if errors.Is(err, toolapi.ErrInvalidInput) {
		status = valueInvalid
	}
	in.execs.WithLabelValues(host, status).Inc()
	in.execDur.WithLabelValues(host).Observe(took.Seconds())
}

// ProcessAnswered counts one process call of p that answered res, err
// (sessions.Observer).
func (in *Set) ProcessAnswered(p api.ProcessParams, res api.Result, err error) {
	outcome := "ok"
	switch {
	case errors.Is(err, toolapi.ErrInvalidInput):
		outcome = valueInvalid
	case err != nil:
		outcome = valueError
	case res.Details.Error == api.ErrorNotFound:
		outcome = "not_found"
	}
	if err == nil && (p.Action == "poll" || p.Action == "log") {
		in.outputBytes.WithLabelValues("process").Add(float64(textBytes(res)))
	}
	in.procs.WithLabelValues(oneOf(p.Action, api.ProcessActions, valueInvalid), outcome).Inc()
}

// Register adds collectors of other parts of the daemon (the sandbox
// Engines' health) to the registry.
func (in *Set) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := in.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func textBytes(res api.Result) int {
	n := 0
	for _, c := range res.Content {
		n += len(c.Text)
	}
	return n
}

// SandboxCreated implements sandbox.Observer.
func (in *Set) SandboxCreated(d time.Duration) { in.createDur.Observe(d.Seconds()) }

// ImageBuilt implements sandbox.Observer.
func (in *Set) ImageBuilt(d time.Duration) { in.buildDur.Observe(d.Seconds()) }

// SupervisorFallback implements sandbox.Observer.
func (in *Set) SupervisorFallback(op string) {
	in.fallbacks.WithLabelValues(oneOf(op, fallbackOps, fallbackOps[0])).Inc()
}

// EngineError implements sandbox.Observer.
func (in *Set) EngineError(class string) {
	in.engineErrs.WithLabelValues(oneOf(class, sandbox.EngineErrorClasses, "other")).Inc()
}

// WarmPool implements sandbox.Observer.
func (in *Set) WarmPool(hit bool) {
	r := "miss"
	if hit {
		r = "hit"
	}
	in.warmPool.WithLabelValues(r).Inc()
}

// CommandFinished implements sessions.Observer.
func (in *Set) CommandFinished(host vocab.Host, status string, ran time.Duration) {
	in.commandDur.WithLabelValues(oneOf(string(host), vocab.HostNames(), hostNone), oneOf(status, commandStatuses, api.StatusFailed)).Observe(ran.Seconds())
}

// ApprovalDecided implements sessions.Observer.
func (in *Set) ApprovalDecided(decision vocab.Decision, expired bool, waited time.Duration) {
	d := oneOf(string(decision), approvalDecisions, string(vocab.DecisionDeny))
	by := approvalDeciders[0]
	if expired {
		by = approvalDeciders[1]
	}
	in.approvals.WithLabelValues(d, by).Inc()
	in.approvalDur.WithLabelValues(d, by).Observe(waited.Seconds())
}

// Handler serves the registry in the Prometheus text format.
func (in *Set) Handler() http.Handler {
	return promhttp.HandlerFor(in.registry, promhttp.HandlerOpts{Registry: in.registry})
}

// sourceCollector reports the scrape-time gauges.
type sourceCollector struct {
	src Sources
}

var (
	sandboxesDesc = prometheus.NewDesc("sandboxctl_sandboxes", "Managed sandboxes by container state and path (supervisor or plain); per Engine: sandboxctl_engine_sandboxes.", []string{"state", "path"}, nil)
	runningDesc   = prometheus.NewDesc("sandboxctl_sessions_running", "Sessions (commands) not yet finished.", nil, nil)
	pendingDesc   = prometheus.NewDesc("sandboxctl_approvals_pending", "Approval requests awaiting a decision.", nil, nil)
	scrapeErrDesc = prometheus.NewDesc("sandboxctl_scrape_source_errors", "1 when a scrape-time source failed this scrape, by source.", []string{"source"}, nil)
)

// scrapeTimeout bounds the sources' work in one scrape.
const scrapeTimeout = 3 * time.Second

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- runningDesc
	ch <- pendingDesc
	ch <- scrapeErrDesc
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	failed := func(source string, err error) {
		v := 0.0
		if err != nil {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, v, source)
	}
	if c.src.Sandboxes != nil {
		list, err := c.src.Sandboxes(ctx)
		counts := map[[2]string]int{}
		for _, s := range list {
			counts[[2]string{oneOf(s.State, sandbox.SandboxStates, "other"), oneOf(s.Path, []string{sandbox.PathSupervisor, sandbox.PathPlain}, sandbox.PathPlain)}]++
		}
		for _, st := range sandbox.SandboxStates {
			for _, eng := range []string{sandbox.PathSupervisor, sandbox.PathPlain} {
				ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(counts[[2]string{st, eng}]), st, eng)
			}
		}
		failed("sandboxes", err)
	}
	if c.src.RunningSessions != nil {
		ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(c.src.RunningSessions()))
	}
	if c.src.PendingApprovals != nil {
		n, err := c.src.PendingApprovals(ctx)
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n))
		failed("approvals", err)
	}
}

// egressKinds are the kind label values of sandboxctl_egress_decisions_total.
var egressKinds = []string{egress.KindDNS, egress.KindConnect, egress.KindHTTP, egress.KindTLS}

// EgressDecided implements egress.Observer.
func (in *Set) EgressDecided(d egress.Decision) {
	decision := "denied"
	if d.Allowed {
		decision = "allowed"
	}
	in.egress.WithLabelValues(oneOf(d.Kind, egressKinds, valueInvalid), decision).Inc()
	in.egressBytes.WithLabelValues("out").Add(float64(d.BytesOut))
	in.egressBytes.WithLabelValues("in").Add(float64(d.BytesIn))
}
