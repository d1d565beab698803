package auth

// NOTE: this file is the token parser shared by Verify and Verifier:
// splitting, canonical base64url, the header, the claims and their time
// checks, and one signature check per algorithm. Key selection (shared
// keys, JWKS) is in verifier.go; the keys themselves in jwks.go.

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	"github.com/threadcast/threadcast/internal/jsonscan"
)

// The algorithms a token may be signed with (its header's "alg"). A key
// carries exactly one of them, and a token verifies only with a key whose
// algorithm is its header's: the header alone never picks the algorithm.
const (
	AlgHS256 = "HS256" // HMAC-SHA256 with a shared key (--auth-key)
	AlgEdDSA = "EdDSA" // Ed25519
	AlgES256 = "ES256" // ECDSA P-256 with SHA-256, signature r‖s
	AlgRS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256
)

// b64 encodes; decodeSegment decodes only canonical unpadded base64url.
var (
	b64       = base64.RawURLEncoding
	b64Strict = base64.RawURLEncoding.Strict()
)

// decodeSegment decodes one part of a token. Only the canonical encoding is
// accepted, so that a token has exactly one spelling: no padding, no bytes
// outside the base64url alphabet (the standard decoder skips CR and LF even
// in strict mode, hence the scan), and zero unused low bits in the last
// character (Strict), without which flipping those bits gives a second
// token with the same signature.
func decodeSegment(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, fmt.Errorf("byte %d (%q) is not base64url", i, c)
		}
	}
	return b64Strict.DecodeString(s)
}

// jwtHeader is the part of a JOSE header Threadcast reads. jku, x5u and
// jwk are deliberately ignored: keys never come from the token itself.
type jwtHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid,omitempty"`
	Typ  string          `json:"typ,omitempty"`
	Crit json.RawMessage `json:"crit,omitempty"`
}

// headerNames and claimNames are the members jwtHeader and Claims read
// (their json tags), which checkMembers holds to one exact spelling.
var (
	headerNames = jsonNames(reflect.TypeFor[jwtHeader]())
	claimNames  = jsonNames(reflect.TypeFor[Claims]())
)

// jsonNames returns the member names encoding/json decodes into the
// fields of struct t: the json tag's name, else the field's.
func jsonNames(t reflect.Type) [][]byte {
	var names [][]byte
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, []byte(name))
	}
	if len(names) > 64 {
		panic("auth: checkMembers tracks at most 64 names")
	}
	return names
}

// errNotObject is checkMembers' answer to what is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// checkMembers checks the member names of the JSON object b that match
// one of names (at most 64) regardless of case: each must appear at most
// once and be spelled exactly as in names. encoding/json matches member
// names regardless of case (with Unicode folding: "ſcope" is "scope") and
// keeps the last of repeated ones, where JSON names are case-sensitive and
// RFC 7515 §4 and RFC 7519 §4 want them unique; without this check
// {"tenant":"a","Tenant":"b"} would be tenant b here and tenant a to the
// issuer's parser and to the RFC. Other members, and nested objects, are
// not looked at. It allocates only for a name with escapes.
func checkMembers(b []byte, names [][]byte) error {
	var seen uint64
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errNotObject
		}
		end, escaped := skipString(b, i)
		if end < 0 {
			return errNotObject
		}
		name := b[i+1 : end-1]
		if escaped {
			var s string
			if json.Unmarshal(b[i:end], &s) != nil {
				return errNotObject
			}
			name = []byte(s)
		}
		for n, want := range names {
			if !bytes.EqualFold(name, want) {
				continue
			}
			if !bytes.Equal(name, want) {
				return fmt.Errorf("member %q is not spelled %q", truncate(string(name)), want)
			}
			if seen&(1<<n) != 0 {
				return fmt.Errorf("member %q twice", want)
			}
			seen |= 1 << n
			break
		}
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return errNotObject
		}
		if i = skipValue(b, skipSpace(b, i+1)); i < 0 {
			return errNotObject
		}
		switch i = skipSpace(b, i); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return nil // what follows, if anything, json.Unmarshal refuses
		default:
			return errNotObject
		}
	}
}

// skipSpace returns the index of the first byte of b from i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the JSON string starting at b[i]
// (a '"'), and whether it has escapes; -1 when it does not end.
func skipString(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// skipValue returns the index after the JSON value starting at b[i], or
// -1. It finds where the value ends, not whether it is valid JSON:
// json.Unmarshal, which reads the same bytes, checks that. A scalar runs
// to the next ',', '}', ']' or white space, whatever it holds.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"', '{', '[':
		return jsonscan.End(b, i)
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// parsed is a token split and decoded, its signature not yet checked.
type parsed struct {
	hdr    jwtHeader
	signed string // header.payload, what the signature covers
	claims []byte // the payload's JSON
	sig    []byte
}

// hs256Header is what Mint writes; a token carrying it skips the header's
// JSON decoding (the common case, and the one on the hot path).
const hs256Header = `{"alg":"HS256","typ":"JWT"}`

// parse splits and decodes token. It checks the size bound, the structure,
// the canonical encoding and the header (a known alg, no "crit"); it does
// not check the signature or the claims.
func parse(token string) (parsed, error) {
	var p parsed
	if len(token) > MaxTokenLen {
		return p, fmt.Errorf("%w: %d bytes (max %d)", ErrMalformed, len(token), MaxTokenLen)
	}
	h, rest, ok1 := strings.Cut(token, ".")
	pl, s, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.IndexByte(s, '.') >= 0 || h == "" || pl == "" || s == "" {
		return p, fmt.Errorf("%w: want three dot-separated parts", ErrMalformed)
	}
	hb, err := decodeSegment(h)
	if err != nil {
		return p, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if bytes.Equal(hb, []byte(hs256Header)) {
		p.hdr = jwtHeader{Alg: AlgHS256, Typ: "JWT"}
	} else {
		if err := checkMembers(hb, headerNames); err != nil {
			return p, fmt.Errorf("%w: header: %v", ErrMalformed, err)
		}
		// A separate variable: decoding into &p.hdr would move every p to
		// the heap, the common header's included.
		var h jwtHeader
		if err := json.Unmarshal(hb, &h); err != nil {
			return p, fmt.Errorf("%w: header is not JSON", ErrMalformed)
		}
		p.hdr = h
	}
	switch p.hdr.Alg {
	case AlgHS256, AlgEdDSA, AlgES256, AlgRS256:
	default:
		return p, fmt.Errorf("%w: %q", ErrAlgorithm, truncate(p.hdr.Alg))
	}
	if p.hdr.Crit != nil {
		// RFC 7515 §4.1.11: an extension we do not implement must be refused.
		return p, fmt.Errorf("%w: header has crit", ErrMalformed)
	}
	if t := p.hdr.Typ; t != "" && !strings.EqualFold(t, "JWT") && !strings.EqualFold(t, "at+jwt") {
		return p, fmt.Errorf("%w: typ %q", ErrMalformed, truncate(t))
	}
	if p.sig, err = decodeSegment(s); err != nil {
		return p, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	if p.claims, err = decodeSegment(pl); err != nil {
		return p, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if err := checkMembers(p.claims, claimNames); err != nil {
		return p, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	p.signed = token[:len(h)+1+len(pl)]
	return p, nil
}

// checkSignature verifies p's signature with pub under alg, which the
// caller took from the key, never from the token.
func checkSignature(p *parsed, alg string, pub any) error {
	if p.hdr.Alg != alg {
		return fmt.Errorf("%w: token says %q, the key is %s", ErrAlgorithm, truncate(p.hdr.Alg), alg)
	}
	ok := false
	switch alg {
	case AlgHS256:
		return checkHMAC(p, pub.([]byte))
	case AlgEdDSA:
		ok = len(p.sig) == ed25519.SignatureSize && ed25519.Verify(pub.(ed25519.PublicKey), []byte(p.signed), p.sig)
	case AlgES256:
		if len(p.sig) == 64 {
			h := sha256.Sum256([]byte(p.signed))
			r, s := new(big.Int).SetBytes(p.sig[:32]), new(big.Int).SetBytes(p.sig[32:])
			ok = ecdsa.Verify(pub.(*ecdsa.PublicKey), h[:], r, s)
		}
	case AlgRS256:
		k := pub.(*rsa.PublicKey)
		if len(p.sig) == k.Size() {
			h := sha256.Sum256([]byte(p.signed))
			ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], p.sig) == nil
		}
	}
	if !ok {
		return ErrSignature
	}
	return nil
}

// checkHMAC verifies an HS256 signature (in constant time) with a shared
// key; the caller has checked that the header says HS256.
func checkHMAC(p *parsed, key []byte) error {
	if !hmac.Equal(p.sig, sign(key, p.signed)) {
		return ErrSignature
	}
	return nil
}

func sign(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// claimRules are the checks of the claims after the signature.
type claimRules struct {
	now      time.Time
	skew     time.Duration // tolerated clock difference for exp and nbf
	issuer   string        // required iss; "" means not checked
	audience string        // required in aud; "" means aud must be absent
}

// decodeClaims parses the payload and applies r.
func decodeClaims(b []byte, r claimRules) (Claims, error) {
	var c Claims
	if err := json.Unmarshal(b, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: claims are not JSON", ErrMalformed)
	}
	if c.Tenant == "" || c.Expiry == 0 {
		return Claims{}, fmt.Errorf("%w: tenant and exp are required", ErrMalformed)
	}
	if err := checkTimes(&c, r); err != nil {
		return Claims{}, err
	}
	if r.issuer != "" && c.Issuer != r.issuer {
		return Claims{}, fmt.Errorf("%w: %q", ErrIssuer, truncate(c.Issuer))
	}
	switch {
	case r.audience == "" && len(c.Audience) > 0:
		// RFC 7519 §4.1.3: a token meant for a named audience is refused by
		// a recipient that is not one.
		return Claims{}, fmt.Errorf("%w: token is for %q, this server has no audience", ErrAudience, truncate(c.Audience[0]))
	case r.audience != "" && !c.Audience.Has(r.audience):
		return Claims{}, fmt.Errorf("%w: want %q", ErrAudience, truncate(r.audience))
	}
	return c, nil
}

// checkTimes checks c's exp and nbf against r's clock and skew.
func checkTimes(c *Claims, r claimRules) error {
	// Compared on the side of now, which cannot overflow: exp and nbf
	// are anything the issuer wrote, up to the largest int64.
	now := r.now.Unix()
	skew := int64(r.skew / time.Second)
	if now-skew >= c.Expiry {
		return fmt.Errorf("%w: at %s", ErrExpired, time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	}
	if c.NotBefore != 0 && now+skew < c.NotBefore {
		return fmt.Errorf("%w: not before %s", ErrNotYetValid, time.Unix(c.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// Audience is the "aud" claim: one string or an array of strings on the
// wire (RFC 7519 §4.1.3), written as a string when it has one element.
type Audience []string

// Has reports whether aud names a.
func (aud Audience) Has(a string) bool {
	for _, x := range aud {
		if x == a {
			return true
		}
	}
	return false
}

// UnmarshalJSON accepts a string or an array of strings.
func (aud *Audience) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*aud = Audience{s}
		return nil
	}
	var a []string
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	*aud = a
	return nil
}

// MarshalJSON writes one audience as a string, several as an array.
func (aud Audience) MarshalJSON() ([]byte, error) {
	if len(aud) == 1 {
		return json.Marshal(aud[0])
	}
	return json.Marshal([]string(aud))
}
