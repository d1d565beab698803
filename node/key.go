package node

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/threadcast/threadcast/auth"
)

// KeyFile is the name of the token signing key LoadOrCreateKey keeps in a
// data directory.
const KeyFile = "auth.key"

// LoadOrCreateKey returns the token signing key stored at path (hex, as
// written here), or, when there is no file, generates a 32-byte key and
// stores it there (mode 0600, never overwriting a file that appeared
// meanwhile). Keeping the key beside the data is what lets tokens minted
// for a development instance survive its restarts. created tells whether
// the key is new.
func LoadOrCreateKey(path string) (key []byte, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
		if err != nil || len(key) < auth.MinKeyLen {
			return nil, false, fmt.Errorf("node: key file %s: not a hex key of at least %d bytes", path, auth.MinKeyLen)
		}
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("node: key file: %w", err)
	}
	key = make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateKey(path) // another process won the race: use its key
	}
	if err != nil {
		return nil, false, fmt.Errorf("node: key file: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("node: key file: %w", werr)
	}
	return key, true, nil
}
