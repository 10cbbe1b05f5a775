package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClaimsHaveOneWinnerAndReleaseHandsOver(t *testing.T) {
	c := NewLocalClaims()
	ctx := context.Background()
	tok, won, err := c.Acquire(ctx, "k")
	if !won || err != nil {
		t.Fatal("the first caller must win")
	}
	var winners atomic.Int64
	var replays atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, w, err := c.Acquire(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			if w {
				winners.Add(1)
				_ = c.Recorded(ctx, "k", tk)
			} else {
				replays.Add(1)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	_ = c.Release(ctx, "k", tok) // the upstream failed: one waiter wins the retry
	wg.Wait()
	if winners.Load() != 1 || replays.Load() != 15 {
		t.Fatalf("winners %d, replays %d; want 1 and 15", winners.Load(), replays.Load())
	}
	if _, won, _ := c.Acquire(ctx, "k"); won {
		t.Fatal("a recorded claim must replay")
	}
	_ = c.Forget(ctx, "k")
	if _, won, _ := c.Acquire(ctx, "k"); !won {
		t.Fatal("a forgotten claim is unclaimed again")
	}
}

func TestAcquireHonoursContext(t *testing.T) {
	c := NewLocalClaims()
	if _, _, err := c.Acquire(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := c.Acquire(ctx, "k"); err == nil {
		t.Fatal("a waiter must give up when its context ends")
	}
}

func TestGenerate(t *testing.T) {
	r := &message.Request{Method: "GET", Path: "/p", Query: []message.KV{{Name: "q", Value: "1"}, {Name: "r", Value: "2"}},
		Headers: []message.KV{{Name: "X-A", Value: "a"}}, Body: []byte(`{"id":7}`)}
	for _, tc := range []struct{ gens, want string }{
		{`[{"matches":{"path":true,"method":true}}]`, `[{"deepEquals":{"path":"/p"}},{"deepEquals":{"method":"GET"}}]`},
		{`[{"matches":{"query":{"q":true,"zz":true}}}]`, `[{"equals":{"query":{"q":"1"}}}]`},
		{`[{"matches":{"query":true},"ignore":{"query":["r"]}}]`, `[{"deepEquals":{"query":{"q":"1"}}}]`},
		{`[{"matches":{"body":true},"jsonpath":{"selector":"$.id"}}]`, `[{"jsonpath":{"selector":"$.id"},"deepEquals":{"body":7}}]`},
		{`[{"matches":{"headers":{"X-A":true}},"predicateOperator":"exists"}]`, `[{"exists":{"headers":{"X-A":true}}}]`},
		{`[]`, `null`},
	} {
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(tc.gens), &raws); err != nil {
			t.Fatal(err)
		}
		gens, err := parseGenerators(raws)
		if err != nil {
			t.Fatalf("%s: %v", tc.gens, err)
		}
		preds, err := generate(gens, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(preds)
		if string(got) != tc.want {
			t.Errorf("%s: generated %s, want %s", tc.gens, got, tc.want)
		}
	}
}

func TestQueryStringKeepsOrderAndEscapesLikeNode(t *testing.T) {
	got := queryString([]message.KV{{Name: "b", Value: "x y"}, {Name: "a", Value: "1"}, {Name: "b", Value: "&"}})
	if want := "b=x%20y&b=%26&a=1"; got != want {
		t.Fatalf("queryString = %s, want %s", got, want)
	}
}

func FuzzParseGenerators(f *testing.F) {
	f.Add([]byte(`[{"matches":{"path":true},"caseSensitive":true}]`))
	f.Add([]byte(`[{"matches":{"body":true},"xpath":{"selector":"//a","ns":{"x":"urn:x"}}}]`))
	f.Add([]byte(`[{"inject":"function(c){return []}"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var raws []json.RawMessage
		if json.Unmarshal(data, &raws) != nil {
			return
		}
		gens, err := parseGenerators(raws)
		if err != nil {
			return
		}
		_, _ = generate(gens, &message.Request{Method: "GET", Path: "/"}, nil)
	})
}

func TestDecryptKeyOpensLegacyEncryptedPEM(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der := x509.MarshalPKCS1PrivateKey(priv)
	//lint:ignore SA1019 the legacy format is what the test needs
	block, err := x509.EncryptPEMBlock(rand.Reader, "RSA PRIVATE KEY", der, []byte("s3cret"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	enc := string(pem.EncodeToMemory(block))
	plain, err := decryptKey(enc, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := pem.Decode(plain)
	if got == nil || !bytes.Equal(got.Bytes, der) {
		t.Fatal("the decrypted key differs")
	}
	if _, err := decryptKey(enc, "wrong"); err == nil {
		t.Fatal("a wrong passphrase must fail")
	}
	if same, _ := decryptKey("not pem", "x"); string(same) != "not pem" {
		t.Fatal("a key without encryption passes through")
	}
}
