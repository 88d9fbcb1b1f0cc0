package node

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/settee/settee/smoosh"
)

// Settings are stored under node keys <0000>'C'<section>/<key>; a "%" or
// "/" in the section is escaped (%25, %2F), so the first "/" ends it.
func keyConfig(section, key string) []byte {
	section = strings.NewReplacer("%", "%25", "/", "%2F").Replace(section)
	return append([]byte{0, 0, 0, 0, 'C'}, section+"/"+key...)
}

// configKeyName is keyConfig's section and key again.
func configKeyName(k []byte) (section, key string) {
	section, key, _ = strings.Cut(string(k[5:]), "/")
	return strings.NewReplacer("%2F", "/", "%25", "%").Replace(section), key
}

// startSmoosh starts the auto-compactor with the settings stored in badger.
func (n *Node) startSmoosh() {
	n.conf.mu.Lock()
	stored := maps.Clone(n.conf.stored[smoosh.Section])
	n.conf.mu.Unlock()
	// _config writes persist the values (nodeconfig.go)
	n.smoosh = smoosh.New(smooshTarget{n}, stored, nil, n.log)
	n.smoosh.Start()
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
