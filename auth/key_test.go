package auth

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"testing"
	"time"
)

// Key is crypto/pbkdf2's function, byte for byte.
func TestKeyIsPBKDF2(t *testing.T) {
	for _, iter := range []int{1, 2, 10, CheckEvery - 1, CheckEvery, CheckEvery + 1, 3*CheckEvery + 7} {
		for _, keyLen := range []int{16, 20, 32, 64, 65} {
			want, _ := pbkdf2.Key(sha256.New, "pw", []byte("salt"), iter, keyLen)
			if got := Key(context.Background(), sha256.New, "pw", "salt", iter, keyLen); !bytes.Equal(got, want) {
				t.Fatalf("sha256 iter %d len %d: %x, want %x", iter, keyLen, got, want)
			}
			want, _ = pbkdf2.Key(sha1.New, "pw", []byte("salt"), iter, keyLen)
			if got := Key(context.Background(), sha1.New, "pw", "salt", iter, keyLen); !bytes.Equal(got, want) {
				t.Fatalf("sha1 iter %d len %d: %x, want %x", iter, keyLen, got, want)
			}
		}
	}
}

// A hash of a billion iterations (minutes of CPU) stops within
// milliseconds of its context ending, and says so.
func TestVerifyStopsWithItsContext(t *testing.T) {
	c := &Credential{Scheme: "pbkdf2", PRF: "sha256", Salt: "s", Iterations: DefaultMaxIterations, DerivedKey: "00"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	ok, err := c.VerifyContext(ctx, "pw")
	if ok || err != context.DeadlineExceeded {
		t.Fatalf("VerifyContext = %v, %v; want false, deadline exceeded", ok, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("VerifyContext took %v after a 50 ms deadline", d)
	}
}

func TestCheckIterations(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want error
	}{{0, ErrIterationsTooLow}, {9, ErrIterationsTooLow}, {10, nil}, {20, nil}, {21, ErrIterationsTooHigh}, {-5, ErrIterationsTooLow}} {
		if got := CheckIterations(tc.n, 10, 20); got != tc.want {
			t.Errorf("CheckIterations(%d, 10, 20) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// BenchmarkKey compares Key, which looks at its context every CheckEvery
// iterations, with crypto/pbkdf2.Key on CouchDB's 600,000 iterations.
// Measured (2 cores shared, go1.26, benchstat of -count 10): see
// docs/security.md, "What limits protect the node: password hashing".
func BenchmarkKey(b *testing.B) {
	b.Run("crypto-pbkdf2", func(b *testing.B) {
		for b.Loop() {
			_, _ = pbkdf2.Key(sha256.New, "password", []byte("0123456789abcdef0123456789abcdef"), DefaultIterations, 32)
		}
	})
	b.Run("auth-Key-ctx", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for b.Loop() {
			_ = Key(ctx, sha256.New, "password", "0123456789abcdef0123456789abcdef", DefaultIterations, 32)
		}
	})
}
