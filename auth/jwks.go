package auth

// NOTE: this file is the keys: ParseJWKS and the rules that pin each key's
// algorithm, then the Ed25519 side that mints (Ed25519Signer, its JWKS
// document, reading and writing its private key).

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// MinRSABits is the smallest RSA modulus a JWKS key may have.
const MinRSABits = 2048

// Key is one public verification key from a JWKS document. Its algorithm
// is pinned when the document is read: a key is used with that algorithm
// and no other, whatever a token's header says.
type Key struct {
	ID  string // kid
	Alg string // one of AlgEdDSA, AlgES256, AlgRS256
	pub any    // ed25519.PublicKey, *ecdsa.PublicKey or *rsa.PublicKey
}

// jwk is a JSON Web Key (RFC 7517, 7518 §6, 8037) as far as Threadcast reads it.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	D   string `json:"d,omitempty"`
}

// ParseJWKS reads a JWKS document ({"keys":[…]}) into its usable signing
// keys by kid. A key Threadcast cannot use — another use than "sig", an
// unsupported kty, curve or alg, a symmetric ("oct") key, which has no
// place in a published document — is skipped and named in skipped. A
// document that is not JSON, repeats a kid, carries private key material
// or has no usable key is an error: the caller keeps its previous keys.
func ParseJWKS(b []byte) (keys map[string]*Key, skipped []string, err error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("%w: JWKS is not JSON: %v", ErrKeySource, err)
	}
	keys = make(map[string]*Key, len(doc.Keys))
	for i, j := range doc.Keys {
		if j.D != "" {
			return nil, nil, fmt.Errorf("%w: JWKS key %d (%q) includes a private key", ErrKeySource, i, truncate(j.Kid))
		}
		if j.Kid == "" {
			skipped = append(skipped, fmt.Sprintf("key %d: no kid", i))
			continue
		}
		if _, dup := keys[j.Kid]; dup {
			return nil, nil, fmt.Errorf("%w: JWKS repeats kid %q", ErrKeySource, truncate(j.Kid))
		}
		k, err := j.key()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("kid %q: %v", truncate(j.Kid), err))
			continue
		}
		keys[j.Kid] = k
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("%w: JWKS has no usable signing key (%d skipped)", ErrKeySource, len(skipped))
	}
	return keys, skipped, nil
}

// key turns j into a Key, pinning its algorithm: an Ed25519 key is EdDSA,
// a P-256 key ES256, an RSA key RS256 (the only RSA algorithm accepted).
func (j *jwk) key() (*Key, error) {
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("use %q", truncate(j.Use))
	}
	k := &Key{ID: j.Kid}
	switch j.Kty {
	case "OKP":
		if j.Crv != "Ed25519" || (j.Alg != "" && j.Alg != AlgEdDSA && j.Alg != "Ed25519") {
			return nil, fmt.Errorf("OKP crv %q alg %q", truncate(j.Crv), truncate(j.Alg))
		}
		x, err := decodeSegment(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 x")
		}
		k.Alg, k.pub = AlgEdDSA, ed25519.PublicKey(x)
	case "EC":
		if j.Crv != "P-256" || (j.Alg != "" && j.Alg != AlgES256) {
			return nil, fmt.Errorf("EC crv %q alg %q", truncate(j.Crv), truncate(j.Alg))
		}
		x, err1 := decodeSegment(j.X)
		y, err2 := decodeSegment(j.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return nil, errors.New("bad P-256 coordinates")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, fmt.Errorf("P-256 point: %v", err)
		}
		k.Alg, k.pub = AlgES256, pub
	case "RSA":
		if j.Alg != "" && j.Alg != AlgRS256 {
			return nil, fmt.Errorf("RSA alg %q", truncate(j.Alg))
		}
		n, err1 := decodeSegment(j.N)
		e, err2 := decodeSegment(j.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad RSA n or e")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("RSA modulus of %d bits (min %d)", pub.N.BitLen(), MinRSABits)
		}
		if pub.E < 3 || pub.E&1 == 0 {
			return nil, fmt.Errorf("RSA exponent %d", pub.E)
		}
		k.Alg, k.pub = AlgRS256, pub
	default:
		return nil, fmt.Errorf("kty %q", truncate(j.Kty))
	}
	return k, nil
}

// Ed25519Signer mints EdDSA tokens with one private key, naming its key id
// in every token's header so that verifiers pick the key from a JWKS. It
// is plain data, safe for concurrent use.
type Ed25519Signer struct {
	Key ed25519.PrivateKey
	Kid string
}

// Mint returns an EdDSA token for c (which must name a tenant and an
// expiry).
func (s Ed25519Signer) Mint(c Claims) (string, error) {
	if len(s.Key) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("%w: not an Ed25519 private key", ErrClaims)
	}
	if s.Kid == "" {
		return "", fmt.Errorf("%w: a kid is required", ErrClaims)
	}
	h, err := json.Marshal(jwtHeader{Alg: AlgEdDSA, Kid: s.Kid, Typ: "JWT"})
	if err != nil {
		return "", err
	}
	return mint(string(h), c, func(signed string) ([]byte, error) {
		return ed25519.Sign(s.Key, []byte(signed)), nil
	})
}

// JWKS returns the JWKS document publishing the signer's public key, for
// an operator to serve at --jwks-url or hand over as --jwks-file.
func (s Ed25519Signer) JWKS() ([]byte, error) {
	pub, ok := s.Key.Public().(ed25519.PublicKey)
	if !ok || len(s.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("auth: not an Ed25519 private key")
	}
	doc := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{{Kty: "OKP", Crv: "Ed25519", Kid: s.Kid, Alg: AlgEdDSA, Use: "sig", X: b64.EncodeToString(pub)}}}
	return json.MarshalIndent(doc, "", "  ")
}

// ParseEd25519Key reads an Ed25519 private key: a PEM "PRIVATE KEY" block
// (PKCS #8, as `openssl genpkey -algorithm ed25519` writes), or the raw
// 32-byte seed, as bytes or as hex or base64 text.
func ParseEd25519Key(b []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("auth: PEM key: %w", err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("auth: PEM key is a %T, not Ed25519", k)
		}
		return ek, nil
	}
	seed, err := seedBytes(b)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// seedBytes reads a raw Ed25519 seed: 32 bytes, or their hex or base64
// (standard or URL alphabet) spelling, surrounding white space ignored.
func seedBytes(b []byte) ([]byte, error) {
	if len(b) == ed25519.SeedSize {
		return b, nil
	}
	t := strings.TrimSpace(string(b))
	for _, dec := range []func(string) ([]byte, error){
		hex.DecodeString, base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString,
	} {
		if s, err := dec(t); err == nil && len(s) == ed25519.SeedSize {
			return s, nil
		}
	}
	return nil, fmt.Errorf("auth: not an Ed25519 key: want a PEM PKCS #8 block or a %d-byte seed (raw, hex or base64)", ed25519.SeedSize)
}

// MarshalEd25519Key returns k as a PEM PKCS #8 "PRIVATE KEY" block, the
// form ParseEd25519Key and openssl read.
func MarshalEd25519Key(k ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
