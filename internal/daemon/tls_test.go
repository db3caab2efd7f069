package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/apiclient/tcpclient"
)

// writeSelfSigned writes a certificate for 127.0.0.1 and its key into dir.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sandboxctl test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTCPWithTLS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t, t.TempDir())
	r := startServer(t, Options{Listen: "127.0.0.1:0", Token: "tls-token-0123456789", TLSCertFile: certFile, TLSKeyFile: keyFile})
	base := "https://" + r.srv.TCPAddr().String()

	c := tcpclient.New(base, "tls-token-0123456789", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	defer c.CloseIdleConnections()
	if _, err := c.Health(t.Context()); err != nil {
		t.Fatalf("health over TLS: %v", err)
	}
	bad := tcpclient.New(base, "wrong", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	defer bad.CloseIdleConnections()
	var apiErr *apiclient.APIError
	if _, err := bad.Health(t.Context()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token over TLS: %v, want 401", err)
	}
	plain := tcpclient.New("http://"+r.srv.TCPAddr().String(), "tls-token-0123456789", nil)
	defer plain.CloseIdleConnections()
	if _, err := plain.Health(t.Context()); err == nil {
		t.Error("plain HTTP accepted on the TLS listener")
	}
}

func TestTLSOptionsValidated(t *testing.T) {
	for _, opts := range []Options{
		{TLSCertFile: "c.pem", Listen: "127.0.0.1:0"},
		{TLSCertFile: "c.pem", TLSKeyFile: "k.pem"},
	} {
		opts.StateDir, opts.Tools = t.TempDir(), &fakeTools{}
		if _, err := Listen(t.Context(), opts); err == nil {
			t.Errorf("Listen(%+v) accepted incomplete TLS options", opts)
		}
	}
}
