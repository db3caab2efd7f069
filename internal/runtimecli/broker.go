package runtimecli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/sandboxctl/sandboxctl/egress/broker"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// startBroker builds the credential broker when sandbox.secrets is set
// (docs/secrets.md): every secret's value is read now, so one that is
// missing stops the daemon at start rather than failing a request later.
// The variables the values came from are then removed from the daemon's
// environment, so no gateway command, host supervisor or other child of
// the daemon inherits a value. nil without secrets.
func startBroker(cfg config.File, state string, getenv func(string) string, logger *slog.Logger) (*broker.Broker, error) {
	if len(cfg.Sandbox.Secrets) == 0 {
		return nil, nil
	}
	secrets, err := sandboxconfig.ParseSecrets(cfg.Sandbox.Secrets, cfg.Sandbox.Docker.Env)
	if err != nil {
		return nil, err
	}
	b, err := broker.New(broker.Options{Dir: broker.Dir(state), Secrets: secrets, Getenv: getenv,
		UpstreamCAFile: cfg.Sandbox.SecretsUpstreamCAFile, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("serve: credential broker: %w", err)
	}
	for _, s := range secrets {
		if s.FromEnv != "" {
			if err := os.Unsetenv(s.FromEnv); err != nil {
				return nil, fmt.Errorf("serve: credential broker: drop $%s: %w", s.FromEnv, err)
			}
		}
	}
	return b, nil
}
