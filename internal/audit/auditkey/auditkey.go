// Package auditkey loads the operator's ed25519 keys that sign and check
// the audit log's segments (audit.Options.SigningKey, audit.Verify). It is
// apart from package audit so that what only writes or reads the log
// (the configuration, the light CLI) links no X.509 code.
package auditkey

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// LoadPrivateKey reads an ed25519 private key (PEM, PKCS #8: `openssl
// genpkey -algorithm ed25519`).
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: signing key %s: want an ed25519 key, got %T", path, k)
	}
	return priv, nil
}

// LoadPublicKey reads an ed25519 public key (PEM, PKIX: `openssl pkey
// -pubout`).
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: public key %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("audit: public key %s: want an ed25519 key, got %T", path, k)
	}
	return pub, nil
}

func readPEM(path string) (*pem.Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("audit: %s holds no PEM block", path)
	}
	return block, nil
}
