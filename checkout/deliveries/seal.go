package deliveries

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// ErrNoSecretsKey is returned when an endpoint secret must be sealed or opened and no
// TEKRAR_SECRETS_KEY was configured.
var ErrNoSecretsKey = errors.New("hooks: TEKRAR_SECRETS_KEY is not set")

// Sealer encrypts endpoint signing secrets at rest with AES-256-GCM. They cannot be stored
// hashed, as client secrets are: tekrar must compute an HMAC with them for every delivery.
// A copy of the database alone (a backup, a replica, a dump) then holds nothing that signs.
type Sealer struct {
	aead cipher.AEAD
}

// NewSecretsKey returns a fresh key in its text form: the base64 of 32 random bytes.
func NewSecretsKey() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's RNG does not fail
	}
	return base64.StdEncoding.EncodeToString(b)
}

// NewSealer reads a key's text form (standard base64 of 32 bytes). An empty key gives a
// nil Sealer, whose every Seal and Open fails with ErrNoSecretsKey.
func NewSealer(key string) (*Sealer, error) {
	if key == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) != 32 {
		return nil, errors.New("the secrets key must be the base64 of 32 random bytes (openssl rand -base64 32)")
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain under a fresh random nonce: nonce, then ciphertext and tag.
// endpoint is bound as additional data, so that a sealed secret copied onto another
// endpoint's row does not open.
func (s *Sealer) Seal(plain []byte, endpoint int64) ([]byte, error) {
	if s == nil {
		return nil, ErrNoSecretsKey
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return s.aead.Seal(nonce, nonce, plain, ad(endpoint)), nil
}

// Open decrypts what Seal sealed for the same endpoint.
func (s *Sealer) Open(sealed []byte, endpoint int64) ([]byte, error) {
	if s == nil {
		return nil, ErrNoSecretsKey
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("open secret: too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], ad(endpoint))
	if err != nil {
		return nil, fmt.Errorf("open secret of endpoint %d (is TEKRAR_SECRETS_KEY the one it was sealed with?): %w", endpoint, err)
	}
	return plain, nil
}

func ad(endpoint int64) []byte { return fmt.Appendf(nil, "webhook_endpoint:%d", endpoint) }
