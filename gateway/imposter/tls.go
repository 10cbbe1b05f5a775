package imposter

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
)

// tlsConfig builds the https listener's configuration from the imposter's
// key and cert, or the process's built-in self-signed pair. mutualAuth asks
// the client for a certificate without verifying it, as mb does.
func (imp *Imposter) tlsConfig() (*tls.Config, error) {
	if imp.spec.Key == "" || imp.spec.Cert == "" {
		key, cert, err := builtinPair()
		if err != nil {
			return nil, mberr.New(mberr.CannotStartServer, "self-signed certificate: "+err.Error())
		}
		imp.spec.Key, imp.spec.Cert = key, cert
	}
	pair, err := tls.X509KeyPair([]byte(imp.spec.Cert), []byte(imp.spec.Key))
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid key or cert: "+err.Error())
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if imp.spec.Protocol == "https" {
		// h2 by ALPN (h2.go); a wss imposter speaks HTTP/1.1 only.
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if imp.spec.MutualAuth {
		cfg.ClientAuth = tls.RequestClientCert
	}
	return cfg, nil
}

var builtin struct {
	once      sync.Once
	key, cert string
	err       error
}

// builtinPair returns a self-signed certificate for localhost and loopback,
// made once per process.
func builtinPair() (key, cert string, err error) {
	builtin.once.Do(func() {
		builtin.key, builtin.cert, builtin.err = selfSigned()
	})
	return builtin.key, builtin.cert, builtin.err
}

func selfSigned() (string, string, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "riftgate", Organization: []string{"riftgate"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	k := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	c := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return string(k), string(c), nil
}
