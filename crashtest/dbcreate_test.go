package crashtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/settee/settee/internal/testport"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClusterKillDuringCreates creates databases (q=4 n=3) through node 1
// of a three-process cluster while a node is killed with SIGKILL: node 2 in
// one case, node 1 itself (the node coordinating the creates) in the other.
// The killed node is restarted and the cluster left to converge. Then, for
// every name a PUT was sent for, either every node has the database (GET
// 200, the same _shards map, a doc written through each node readable
// through the others) or none has it (404); a PUT answered 201 or 202 must
// be in the first group. Nothing may be half-created: there on some nodes
// and not on others, or there but refusing writes.
func TestClusterKillDuringCreates(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess cluster test")
	}
	for _, tc := range []struct {
		name   string
		victim int
	}{
		{"other node", 1},
		{"coordinating node", 0},
	} {
		t.Run(tc.name, func(t *testing.T) { killDuringCreates(t, tc.victim) })
	}
}

func killDuringCreates(t *testing.T, victim int) {
	nodes, clients := startCluster3(t, "dc")
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()

	// outcome of each PUT: its status, 0 for a transport error (the node
	// died with the request in flight, or was already dead)
	var mu sync.Mutex
	outcome := map[string]int{}
	var killedAt time.Time
	killed := make(chan struct{})
	const workers = 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("dc%d-%04d", w, i)
				st, b, err := clients[0].do("PUT", "/"+name+"?q=4&n=3", nil)
				if err != nil {
					st = 0
				} else if st != 201 && st != 202 {
					t.Errorf("PUT /%s: %d %s", name, st, clip(b))
				}
				mu.Lock()
				outcome[name] = st
				done := !killedAt.IsZero() && time.Since(killedAt) > time.Second
				mu.Unlock()
				if done {
					return
				}
				if err != nil {
					// the coordinator is gone; a few more tries find it dead
					time.Sleep(100 * time.Millisecond)
				}
				// a steady stream, a few hundred names in all
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	go func() {
		defer close(killed)
		time.Sleep(1200 * time.Millisecond)
		nodes[victim].kill()
		mu.Lock()
		killedAt = time.Now()
		mu.Unlock()
	}()
	<-killed
	wg.Wait()
	count := map[int]int{}
	for _, st := range outcome {
		count[st]++
	}
	acked := count[201] + count[202]
	t.Logf("%d creates sent: %d answered 201, %d 202, %d without an answer", len(outcome), count[201], count[202], count[0])
	if acked == 0 {
		t.Fatal("no create was acknowledged before the kill")
	}

	nodes[victim].start()
	waitMembers(t, clients, 3)

	names := make([]string, 0, len(outcome))
	for name := range outcome {
		names = append(names, name)
	}
	sort.Strings(names)
	// converged: every name is on all nodes or on none (anti-entropy
	// pushes shard maps every 5 s)
	var state map[string][3]int
	deadline := time.Now().Add(60 * time.Second)
	for {
		state = map[string][3]int{}
		var split []string
		for _, name := range names {
			var sts [3]int
			for i, c := range clients {
				st, _, err := c.do("GET", "/"+name, nil)
				if err != nil {
					st = -1
				}
				sts[i] = st
			}
			state[name] = sts
			if !(sts == [3]int{200, 200, 200} || sts == [3]int{404, 404, 404}) {
				split = append(split, fmt.Sprintf("%s %v", name, sts))
			}
		}
		if len(split) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after 60 s: %d databases answer differently across nodes (GET /db on nodes 1, 2, 3): %s",
				len(split), strings.Join(split[:min(10, len(split))], "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}

	exist := 0
	for _, name := range names {
		st := outcome[name]
		if state[name][0] == 404 {
			if st == 201 || st == 202 {
				t.Errorf("PUT /%s answered %d, but no node has it", name, st)
			}
			continue
		}
		exist++
		// the same shard map everywhere
		var maps [3][]byte
		for i, c := range clients {
			var sh struct {
				Shards map[string][]string `json:"shards"`
			}
			c.mustJSON(t, "GET", "/"+name+"/_shards", nil, 200, &sh)
			if len(sh.Shards) != 4 {
				t.Errorf("%s on node %d: %d ranges, want 4: %v", name, i+1, len(sh.Shards), sh.Shards)
			}
			for r, ns := range sh.Shards {
				if len(ns) != 3 {
					t.Errorf("%s on node %d: range %s has copies on %v, want 3", name, i+1, r, ns)
				}
				sort.Strings(ns)
			}
			maps[i], _ = json.Marshal(sh.Shards)
		}
		if !bytes.Equal(maps[0], maps[1]) || !bytes.Equal(maps[0], maps[2]) {
			t.Errorf("%s: shard maps differ: %s | %s | %s", name, maps[0], maps[1], maps[2])
		}
		// it takes writes through every node, readable through the others
		for i, c := range clients {
			id := fmt.Sprintf("from-node%d", i+1)
			if st, b, err := c.do("PUT", "/"+name+"/"+id, []byte(`{"v":1}`)); err != nil || st != 201 {
				t.Errorf("PUT /%s/%s through node %d: %d %s %v", name, id, i+1, st, clip(b), err)
			}
		}
		for i := range clients {
			id := fmt.Sprintf("from-node%d", i+1)
			for j, c := range clients {
				if j == i {
					continue
				}
				if st, b, err := c.do("GET", "/"+name+"/"+id, nil); err != nil || st != 200 {
					t.Errorf("GET /%s/%s through node %d: %d %s %v", name, id, j+1, st, clip(b), err)
				}
			}
		}
	}
	t.Logf("after convergence: %d databases on every node, %d on none", exist, len(names)-exist)
}

// startCluster3 starts three node processes joined through node 1 and
// returns them with a client for each.
func startCluster3(t *testing.T, prefix string) ([]*server, []*client) {
	t.Helper()
	nodes := make([]*server, 3)
	clients := make([]*client, 3)
	for i := range nodes {
		s := newServer(t)
		s.addr = testport.Addr(t)
		s.extra = []string{"--name", fmt.Sprintf("%s%d@127.0.0.1", prefix, i+1), "--node-addr", testport.Addr(t), "--cluster-secret", prefix + "-secret"}
		if i > 0 {
			s.extra = append(s.extra, "--join", nodes[0].addr)
		}
		nodes[i] = s
		clients[i] = newClient(s.baseURL())
	}
	for _, s := range nodes {
		s.start()
	}
	waitMembers(t, clients, 3)
	return nodes, clients
}

// waitMembers waits until every node sees n nodes up.
func waitMembers(t *testing.T, clients []*client, n int) {
	t.Helper()
	waitFor(t, 60*time.Second, func() error {
		for i, c := range clients {
			var m struct {
				AllNodes []string `json:"all_nodes"`
			}
			st, b, err := c.do("GET", "/_membership", nil)
			if err != nil || st != 200 || json.Unmarshal(b, &m) != nil || len(m.AllNodes) != n {
				return fmt.Errorf("membership of node %d: %d %s %v", i+1, st, clip(b), err)
			}
		}
		return nil
	})
}
