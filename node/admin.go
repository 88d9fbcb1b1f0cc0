package node

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/storage"
)

func loadOrCreate(db *badger.DB, key []byte, mk func() ([]byte, error)) ([]byte, error) {
	var out []byte
	err := db.Update(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err == nil {
			out, err = it.ValueCopy(nil)
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if out, err = mk(); err != nil {
			return err
		}
		return txn.Set(key, out)
	})
	if err != nil {
		return nil, fmt.Errorf("node: load %q: %w", key[4:], err)
	}
	return out, nil
}

// loadAdmin returns the server admin: from the --admin flag (stored as a
// PBKDF2 hash, replacing any older one), else the stored one, else a new
// one with a generated password shown once.
func (n *Node) loadAdmin() (*auth.Credential, error) {
	iters := auth.DefaultIterations
	if n.cfg.AdminIterations > 0 {
		iters = n.cfg.AdminIterations
	}
	if user, pw, ok := strings.Cut(n.cfg.Admin, ":"); ok {
		var stored auth.Credential
		if b, err := n.get(keyAdmin); err == nil && b != nil && json.Unmarshal(b, &stored) == nil &&
			stored.Name == user && stored.Verify(pw) {
			return &stored, nil
		}
		cred := auth.NewCredential(user, pw, iters)
		return cred, n.put(keyAdmin, cred)
	}
	b, err := n.get(keyAdmin)
	if err != nil {
		return nil, err
	}
	if b != nil {
		var cred auth.Credential
		if err := json.Unmarshal(b, &cred); err != nil {
			return nil, fmt.Errorf("node: stored admin: %w", err)
		}
		return &cred, nil
	}
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	pw := base64.RawURLEncoding.EncodeToString(raw[:])
	cred := auth.NewCredential("admin", pw, iters)
	if err := n.put(keyAdmin, cred); err != nil {
		return nil, err
	}
	if n.cfg.AdminPasswordOut != nil {
		n.cfg.AdminPasswordOut("admin", pw)
	}
	return cred, nil
}

func (n *Node) get(key []byte) ([]byte, error) {
	var out []byte
	err := n.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	return out, err
}

func (n *Node) put(key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return storage.Update(n.db, func(txn *badger.Txn) error { return txn.Set(key, b) })
}
