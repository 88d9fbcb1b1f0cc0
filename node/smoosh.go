package node

import (
	"context"
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/smoosh"
	"github.com/settee/settee/storage"
)

// Settings are stored under node keys <0000>'C'<section>/<key>.
func keyConfig(section, key string) []byte {
	return append([]byte{0, 0, 0, 0, 'C'}, section+"/"+key...)
}

// startSmoosh starts the auto-compactor with the settings stored in badger.
func (n *Node) startSmoosh() error {
	stored := map[string]string{}
	prefix := keyConfig(smoosh.Section, "")
	err := n.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			stored[string(it.Item().Key()[len(prefix):])] = string(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	save := func(key, value string) error {
		return storage.Update(n.db, func(txn *badger.Txn) error { return txn.Set(keyConfig(smoosh.Section, key), []byte(value)) })
	}
	n.smoosh = smoosh.New(smooshTarget{n}, stored, save, n.log)
	n.smoosh.Start()
	return nil
}

// smooshTarget is the node as smoosh sees it.
type smooshTarget struct{ n *Node }

func (t smooshTarget) AllDBs(context.Context) []string { return t.n.cat.List() }

func (t smooshTarget) Sizes(ctx context.Context, db string) (smoosh.Sizes, error) {
	// bounded: a copy on a node that just went down must not hold the
	// daemon (and a shutdown waiting for it)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := t.n.coord.DiskInfo(ctx, db)
	if err != nil {
		return smoosh.Sizes{}, err
	}
	return smoosh.Sizes{File: d.FileSize, Active: d.ActiveSize, CompactRunning: d.CompactRunning}, nil
}

func (t smooshTarget) Compact(ctx context.Context, db string) error {
	_, err := t.n.coord.Compact(ctx, db)
	return err
}

// ErrConfigReadOnly is SetConfig's answer for a section settee does not
// let change at run time.
var ErrConfigReadOnly = errors.New("node: this config section cannot be changed")

// ConfigSection is a section of the node's runtime config (/_node/_local/_config),
// which holds the smoosh section only.
func (n *Node) ConfigSection(section string) (map[string]string, bool) {
	if section != smoosh.Section || n.smoosh == nil {
		return nil, false
	}
	return n.smoosh.Settings(), true
}

// ConfigSections names the config sections the node has.
func (n *Node) ConfigSections() []string { return []string{smoosh.Section} }

// SetConfig changes a key and returns its old value.
func (n *Node) SetConfig(section, key, value string) (string, error) {
	if section != smoosh.Section || n.smoosh == nil {
		return "", ErrConfigReadOnly
	}
	return n.smoosh.Set(key, value)
}
