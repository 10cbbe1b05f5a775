package loadtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// tlsFlags are the command line's TLS options, turned into a tls.Config by
// config.
type tlsFlags struct {
	insecure bool   // skip the server certificate's verification
	caFile   string // PEM bundle of the roots to trust instead of the system's
	certFile string // client certificate (PEM), for mutual TLS
	keyFile  string // its private key (PEM)
	sni      string // server name to send and to verify; "" is each target's host
}

// config builds the client configuration the flags describe, or nil when
// they ask for nothing beyond the defaults. Contradictory flags are a
// usageError; files that cannot be read or hold no usable PEM are not.
func (f *tlsFlags) config() (*tls.Config, error) {
	switch {
	case f.certFile != "" && f.keyFile == "":
		return nil, usageError{errors.New("-cert needs -key (for a PEM file holding both, give it to both)")}
	case f.keyFile != "" && f.certFile == "":
		return nil, usageError{errors.New("-key needs -cert")}
	case f.insecure && f.caFile != "":
		return nil, usageError{errors.New("-insecure skips verification, so -cacert would not be used: give one of them")}
	}
	if !f.insecure && f.caFile == "" && f.certFile == "" && f.sni == "" {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: f.insecure, ServerName: f.sni}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in it", f.caFile)
		}
	}
	if f.certFile != "" {
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("-cert/-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// targetTLS is the configuration for one https target: base (nil: the
// defaults) with the target's host as the server name unless base names
// one, and its own session cache unless resumption is off or base brings
// a cache. A cache per target, shared by every virtual user: Go keys the
// cache by server name, so targets that share a host name (one machine's
// ports, a cluster behind one certificate name) would otherwise offer each
// other tickets that only the issuing server can decrypt.
func targetTLS(base *tls.Config, host string, fullHandshake bool) *tls.Config {
	var cfg *tls.Config
	if base != nil {
		cfg = base.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if cfg.NextProtos == nil {
		cfg.NextProtos = []string{"http/1.1"}
	}
	if fullHandshake {
		cfg.ClientSessionCache = nil
		cfg.SessionTicketsDisabled = true
	} else if cfg.ClientSessionCache == nil {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	return cfg
}

// tlsHandshakeError is a failed handshake; classify counts it as kind tls
// unless the connection timed out, was reset or was closed on the way.
type tlsHandshakeError struct {
	addr string
	err  error
}

func (e *tlsHandshakeError) Error() string {
	return "tls handshake with " + e.addr + ": " + e.err.Error()
}
func (e *tlsHandshakeError) Unwrap() error { return e.err }

// isTLSError reports whether err is a failed handshake or a TLS alert: the
// server refused the client certificate, a certificate failed to verify,
// no protocol version or cipher was shared, the peer does not speak TLS.
func isTLSError(err error) bool {
	var he *tlsHandshakeError
	var oe *net.OpError
	var rh tls.RecordHeaderError
	var ve *tls.CertificateVerificationError
	return errors.As(err, &he) || errors.As(err, &rh) || errors.As(err, &ve) ||
		// crypto/tls reports alerts, received or sent, as these.
		errors.As(err, &oe) && (oe.Op == "remote error" || oe.Op == "local error")
}

// selfSignedCert makes a certificate for hosts (names or IP addresses),
// signed by its own key, valid for a year: enough for the hello server,
// which its clients reach with -insecure.
func selfSignedCert(hosts ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "riftload hello"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
