package sandboxconfig

import "testing"

func TestSecretsAllowedByTheAllowlist(t *testing.T) {
	c := DefaultConfig()
	c.Network = NetworkConfig{Egress: EgressAllowlist, Allow: []AllowRule{{Domain: "api.example.com"}, {Domain: "*.example.org", Ports: []int{443}}}}
	c.Secrets = map[string]SecretConfig{
		"a": {FromEnv: "A", Hosts: []string{"api.example.com", "x.example.org", "*.b.example.org", "*.example.org"}, Env: "A_TOKEN"},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("allowed hosts refused: %v", err)
	}
	c.Secrets["a"] = SecretConfig{FromEnv: "A", Hosts: []string{"example.org"}, Env: "A_TOKEN"}
	if err := c.Validate(); err == nil {
		t.Error("the apex of a wildcard rule was accepted as a secret's host")
	}
}
