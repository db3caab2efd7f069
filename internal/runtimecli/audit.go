package runtimecli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/audit/auditkey"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// AuditDirName is the audit log's directory inside the state directory.
const AuditDirName = "audit"

// auditSetup is the daemon's audit log (audit.enabled), or nothing.
type auditSetup struct {
	log     *audit.Log     // nil when disabled
	rec     audit.Recorder // log, or audit.Nop
	version string
}

// openAudit opens <state>/audit per cfg.Audit.
func openAudit(cfg config.File, state, version string, logf func(string, ...any)) (*auditSetup, error) {
	a := &auditSetup{rec: audit.Nop{}, version: version}
	if !cfg.Audit.Enabled {
		return a, nil
	}
	opts := audit.Options{MaxSegmentBytes: cfg.Audit.MaxSegmentBytes, MaxBytes: cfg.Audit.MaxBytes,
		OnFailure: cfg.Audit.OnFailure, Logf: logf}
	if cfg.Audit.SigningKey != "" {
		path, err := config.ExpandHome(cfg.Audit.SigningKey)
		if err != nil {
			return nil, fmt.Errorf("serve: audit.signingKey: %w", err)
		}
		if opts.SigningKey, err = auditkey.LoadPrivateKey(path); err != nil {
			return nil, fmt.Errorf("serve: audit.signingKey: %w", err)
		}
	}
	l, err := audit.Open(filepath.Join(state, AuditDirName), opts)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	a.log, a.rec = l, l
	return a, nil
}

// dir is the log's directory, "" when disabled.
func (a *auditSetup) dir() string {
	if a.log == nil {
		return ""
	}
	return a.log.Dir()
}

// files is the files API's view of the log, nil when disabled.
func (a *auditSetup) files() daemon.FileAudit {
	if a.log == nil {
		return nil
	}
	return a.log
}

// started records the daemon's start with the hash of its configuration.
func (a *auditSetup) started(ctx context.Context, cfg config.File) {
	if a.log == nil {
		return
	}
	data, _ := json.Marshal(cfg)
	sum := sha256.Sum256(data)
	_ = a.log.Record(ctx, audit.Record{Kind: audit.KindDaemonStart, Actor: audit.Actor{Via: "daemon"},
		Daemon: &audit.Daemon{Version: a.version, PID: os.Getpid(), ConfigSHA256: hex.EncodeToString(sum[:]), Error: a.log.Notice()}})
}

// close records the daemon's stop and closes the log.
func (a *auditSetup) close() {
	if a.log == nil {
		return
	}
	_ = a.log.Record(context.Background(), audit.Record{Kind: audit.KindDaemonStop, Actor: audit.Actor{Via: "daemon"},
		Daemon: &audit.Daemon{Version: a.version, PID: os.Getpid()}})
	_ = a.log.Close()
}

// gauges are the log's metrics: sandboxctl_audit_healthy (0 while records
// cannot be written) and sandboxctl_audit_write_failures_total.
func (a *auditSetup) gauges() []prometheus.Collector {
	if a.log == nil {
		return nil
	}
	l := a.log
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sandboxctl_audit_healthy",
			Help: "1 while the audit log's last record was written, 0 after a write failed."},
			func() float64 {
				if l.Healthy() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sandboxctl_audit_write_failures_total",
			Help: "Audit records that could not be written (a full disk, an I/O error)."},
			func() float64 { return float64(l.Failures()) }),
	}
}
