package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/settee/settee/internal/couchpath"
	"github.com/spf13/cobra"
)

// Run executes settee admin with args, writing to out; it returns the
// error to print (one line) and exit non-zero with.
func Run(ctx context.Context, args []string, out io.Writer) error {
	// admin hangs under a "settee" parent so that help and usage name the
	// command a user types: "settee admin db [command]"
	root := &cobra.Command{Use: "settee", CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true}}
	root.AddCommand(command(ctx, out))
	root.SetArgs(append([]string{"admin"}, args...))
	root.SetOut(out)
	root.SetErr(io.Discard)
	root.SilenceUsage, root.SilenceErrors = true, true
	return root.Execute()
}

type opts struct {
	url  string
	json bool
	out  io.Writer
	ctx  context.Context
}

func (o *opts) client() (*client, error) { return newClient(o.url) }

// print writes v as JSON with --json, else calls table.
func (o *opts) print(v any, table func(w *tabwriter.Writer)) error {
	if o.json {
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

func command(ctx context.Context, out io.Writer) *cobra.Command {
	o := &opts{out: out, ctx: ctx}
	def := os.Getenv("SETTEE_URL")
	if def == "" {
		def = "http://127.0.0.1:5984"
	}
	root := &cobra.Command{Use: "admin", Short: "operate a settee node or cluster", Args: cobra.ArbitraryArgs,
		// a subcommand, not cobra's root: it checks its own arguments
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		}}
	root.PersistentFlags().StringVar(&o.url, "url", def, "node URL with credentials, e.g. http://admin:pw@127.0.0.1:5984 (SETTEE_URL)")
	root.PersistentFlags().BoolVar(&o.json, "json", false, "print JSON instead of tables")
	root.AddCommand(pingCmd(o), clusterCmd(o), dbCmd(o), compactCmd(o), replicateCmd(o), tasksCmd(o), configCmd(o))
	return root
}

func pingCmd(o *opts) *cobra.Command {
	return &cobra.Command{Use: "ping", Short: "exit 0 when the node's /_up answers", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var up struct{ Status string }
			ctx, cancel := context.WithTimeout(o.ctx, 3*time.Second)
			defer cancel()
			if err := c.do(ctx, "GET", "/_up", nil, &up); err != nil {
				return err
			}
			return o.print(up, func(w *tabwriter.Writer) { fmt.Fprintln(w, up.Status) })
		}}
}

type nodeStatus struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	HTTP    string `json:"http_address"`
	Status  string `json:"status"`
	Shards  int    `json:"shards"`
	Version string `json:"version"`
}

func clusterCmd(o *opts) *cobra.Command {
	cl := &cobra.Command{Use: "cluster", Short: "cluster membership"}
	cl.AddCommand(&cobra.Command{Use: "status", Short: "the nodes, up or down, with the shards they hold", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var m struct {
				All     []string `json:"all_nodes"`
				Cluster []string `json:"cluster_nodes"`
			}
			if err := c.do(o.ctx, "GET", "/_membership", nil, &m); err != nil {
				return err
			}
			nodes := map[string]*nodeStatus{}
			for _, n := range m.Cluster {
				nodes[n] = &nodeStatus{Name: n, Status: "down"}
			}
			for _, n := range m.All {
				if s, ok := nodes[n]; ok {
					s.Status = "up"
				}
			}
			var nd struct {
				Rows []struct {
					Doc struct {
						ID       string `json:"_id"`
						NodeAddr string `json:"node_addr"`
						HTTPAddr string `json:"http_addr"`
					} `json:"doc"`
				} `json:"rows"`
			}
			if err := c.do(o.ctx, "GET", "/_node/_local/_nodes", nil, &nd); err == nil {
				for _, r := range nd.Rows {
					if s, ok := nodes[r.Doc.ID]; ok {
						s.Address, s.HTTP = r.Doc.NodeAddr, r.Doc.HTTPAddr
					}
				}
			}
			var dbs []string
			if err := c.do(o.ctx, "GET", "/_all_dbs", nil, &dbs); err != nil {
				return err
			}
			for _, db := range dbs {
				var sh struct{ Shards map[string][]string }
				if c.do(o.ctx, "GET", "/"+couchpath.Escape(db)+"/_shards", nil, &sh) == nil {
					for _, ns := range sh.Shards {
						for _, n := range ns {
							if s, ok := nodes[n]; ok {
								s.Shards++
							}
						}
					}
				}
			}
			list := make([]*nodeStatus, 0, len(nodes))
			for _, s := range nodes {
				if s.Status == "up" {
					var v struct{ Settee map[string]string }
					if c.do(o.ctx, "GET", "/_node/"+couchpath.Escape(s.Name)+"/_versions", nil, &v) == nil {
						s.Version = v.Settee["version"]
					}
				}
				list = append(list, s)
			}
			sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
			return o.print(map[string]any{"nodes": list}, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "NAME\tADDRESS\tSTATUS\tSHARDS\tVERSION")
				for _, s := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", s.Name, s.Address, s.Status, s.Shards, s.Version)
				}
			})
		}})
	cl.AddCommand(&cobra.Command{Use: "join URL", Short: "add the node at URL (http://user:pw@host:port) to the cluster", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			u, err := url.Parse(args[0])
			if err != nil || u.Host == "" {
				return fmt.Errorf("bad node URL %q", args[0])
			}
			host, portStr, err := net.SplitHostPort(u.Host)
			if err != nil {
				host, portStr = u.Host, "5984"
			}
			port, _ := strconv.Atoi(portStr)
			user, pw := "", ""
			if u.User != nil {
				user = u.User.Username()
				pw, _ = u.User.Password()
			} else if c.base.User != nil {
				user = c.base.User.Username()
				pw, _ = c.base.User.Password()
			}
			body := map[string]any{"action": "add_node", "host": host, "port": port, "username": user, "password": pw}
			if err := c.do(o.ctx, "POST", "/_cluster_setup", body, nil); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "joined": u.Host}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "joined %s\n", u.Host) })
		}})
	cl.AddCommand(&cobra.Command{Use: "remove NAME", Short: "remove a node from the cluster", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(o.ctx, "DELETE", "/_node/_local/_nodes/"+couchpath.Escape(args[0]), nil, nil); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "removed": args[0]}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "removed %s\n", args[0]) })
		}})
	return cl
}

func dbCmd(o *opts) *cobra.Command {
	db := &cobra.Command{Use: "db", Short: "databases"}
	db.AddCommand(&cobra.Command{Use: "list", Short: "list databases", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var names []string
			if err := c.do(o.ctx, "GET", "/_all_dbs", nil, &names); err != nil {
				return err
			}
			return o.print(names, func(w *tabwriter.Writer) {
				for _, n := range names {
					fmt.Fprintln(w, n)
				}
			})
		}})
	var q, n int
	create := &cobra.Command{Use: "create NAME", Short: "create a database", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/" + couchpath.Escape(args[0])
			var qs []string
			if q > 0 {
				qs = append(qs, "q="+strconv.Itoa(q))
			}
			if n > 0 {
				qs = append(qs, "n="+strconv.Itoa(n))
			}
			if len(qs) > 0 {
				path += "?" + strings.Join(qs, "&")
			}
			if err := c.do(o.ctx, "PUT", path, nil, nil); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "db": args[0]}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "created %s\n", args[0]) })
		}}
	create.Flags().IntVar(&q, "q", 0, "shard ranges (0: the node's default)")
	create.Flags().IntVar(&n, "n", 0, "copies of each range (0: the node's default)")
	db.AddCommand(create)
	db.AddCommand(&cobra.Command{Use: "delete NAME", Short: "delete a database", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(o.ctx, "DELETE", "/"+couchpath.Escape(args[0]), nil, nil); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "db": args[0]}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "deleted %s\n", args[0]) })
		}})
	db.AddCommand(&cobra.Command{Use: "info NAME", Short: "a database's info", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var info map[string]any
			if err := c.do(o.ctx, "GET", "/"+couchpath.Escape(args[0]), nil, &info); err != nil {
				return err
			}
			return o.print(info, func(w *tabwriter.Writer) {
				keys := make([]string, 0, len(info))
				for k := range info {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					b, _ := json.Marshal(info[k])
					fmt.Fprintf(w, "%s\t%s\n", k, strings.Trim(string(b), `"`))
				}
			})
		}})
	db.AddCommand(&cobra.Command{Use: "shards NAME", Short: "one line per shard range with its nodes", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var sh struct {
				Shards map[string][]string `json:"shards"`
			}
			if err := c.do(o.ctx, "GET", "/"+couchpath.Escape(args[0])+"/_shards", nil, &sh); err != nil {
				return err
			}
			return o.print(sh, func(w *tabwriter.Writer) {
				ranges := make([]string, 0, len(sh.Shards))
				for r := range sh.Shards {
					ranges = append(ranges, r)
				}
				sort.Strings(ranges)
				fmt.Fprintln(w, "RANGE\tNODES")
				for _, r := range ranges {
					fmt.Fprintf(w, "%s\t%s\n", r, strings.Join(sh.Shards[r], ","))
				}
			})
		}})
	return db
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func compactCmd(o *opts) *cobra.Command {
	var detach bool
	cmd := &cobra.Command{Use: "compact DB", Short: "compact a database and follow its progress", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			db := args[0]
			if err := c.do(o.ctx, "POST", "/"+couchpath.Escape(db)+"/_compact", map[string]any{}, nil); err != nil {
				return err
			}
			if detach {
				return o.print(map[string]any{"ok": true, "db": db}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "compaction of %s started\n", db) })
			}
			var bar *progressbar.ProgressBar
			if !o.json && isTerminal(o.out) {
				bar = progressbar.NewOptions(100, progressbar.OptionSetWriter(o.out), progressbar.OptionSetDescription("compacting "+db))
			}
			start := time.Now()
			for {
				var info struct {
					CompactRunning bool `json:"compact_running"`
				}
				if err := c.do(o.ctx, "GET", "/"+couchpath.Escape(db), nil, &info); err != nil {
					return err
				}
				if bar != nil {
					var tasks []map[string]any
					if c.do(o.ctx, "GET", "/_active_tasks", nil, &tasks) == nil {
						sum, cnt := 0.0, 0
						for _, t := range tasks {
							if t["type"] == "database_compaction" && strings.Contains(fmt.Sprint(t["database"]), db) {
								p, _ := t["progress"].(float64)
								sum += p
								cnt++
							}
						}
						if cnt > 0 {
							_ = bar.Set(int(sum / float64(cnt)))
						}
					}
				}
				if !info.CompactRunning {
					break
				}
				select {
				case <-o.ctx.Done():
					return o.ctx.Err()
				case <-time.After(250 * time.Millisecond):
				}
			}
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(o.out)
			}
			took := time.Since(start).Round(time.Millisecond)
			return o.print(map[string]any{"ok": true, "db": db, "seconds": took.Seconds()}, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "compacted %s in %v\n", db, took)
			})
		}}
	cmd.Flags().BoolVar(&detach, "detach", false, "return at once")
	return cmd
}

func replicateCmd(o *opts) *cobra.Command {
	var continuous, createTarget bool
	cmd := &cobra.Command{Use: "replicate SOURCE TARGET", Short: "replicate a database (list, cancel ID)", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			body := map[string]any{"source": args[0], "target": args[1], "continuous": continuous, "create_target": createTarget}
			var res map[string]any
			if !continuous && !o.json && isTerminal(o.out) {
				err = replicateWithBar(o, c, body, &res, args[0], args[1])
			} else {
				err = c.do(o.ctx, "POST", "/_replicate", body, &res)
			}
			if err != nil {
				return err
			}
			return o.print(res, func(w *tabwriter.Writer) {
				if continuous {
					fmt.Fprintf(w, "continuous replication %v started\n", res["_local_id"])
					return
				}
				fmt.Fprintf(w, "replicated %s -> %s: %v\n", args[0], args[1], summary(res))
			})
		}}
	cmd.Flags().BoolVar(&continuous, "continuous", false, "keep replicating")
	cmd.Flags().BoolVar(&createTarget, "create-target", false, "create the target database")
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "replication jobs", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var jobs struct {
				Jobs []map[string]any `json:"jobs"`
			}
			if err := c.do(o.ctx, "GET", "/_scheduler/jobs", nil, &jobs); err != nil {
				return err
			}
			return o.print(jobs, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tSOURCE\tTARGET\tSTATE")
				for _, j := range jobs.Jobs {
					fmt.Fprintf(w, "%v\t%v\t%v\t%v\n", j["id"], j["source"], j["target"], j["state"])
				}
			})
		}})
	cmd.AddCommand(&cobra.Command{Use: "cancel ID", Short: "cancel a replication job", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(o.ctx, "POST", "/_replicate", map[string]any{"replication_id": args[0], "cancel": true}, nil); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "cancelled": args[0]}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "cancelled %s\n", args[0]) })
		}})
	return cmd
}

// replicateWithBar runs a one-shot replication (POST /_replicate answers
// when it is done) and meanwhile draws docs written out of written+pending
// from the job's _active_tasks entry.
func replicateWithBar(o *opts, c *client, body map[string]any, res *map[string]any, source, target string) error {
	src, tgt := endpointKey(source), endpointKey(target)
	bar := progressbar.NewOptions(1, progressbar.OptionSetWriter(o.out), progressbar.OptionShowCount(),
		progressbar.OptionSetDescription("replicating "+src+" -> "+tgt))
	drawn := false
	done := make(chan error, 1)
	go func() { done <- c.do(o.ctx, "POST", "/_replicate", body, res) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				if drawn {
					fmt.Fprintln(o.out)
				}
				return err
			}
			h, _ := (*res)["history"].([]any)
			written := 0.0
			if len(h) > 0 {
				last, _ := h[0].(map[string]any)
				written, _ = last["docs_written"].(float64)
			}
			if written > 0 || drawn {
				bar.ChangeMax(max(int(written), 1))
				_ = bar.Finish()
				fmt.Fprintln(o.out)
			}
			return nil
		case <-tick.C:
			var tasks []map[string]any
			if c.do(o.ctx, "GET", "/_active_tasks", nil, &tasks) != nil {
				continue
			}
			for _, t := range tasks {
				if t["type"] != "replication" || t["continuous"] == true ||
					endpointKey(fmt.Sprint(t["source"])) != src || endpointKey(fmt.Sprint(t["target"])) != tgt {
					continue
				}
				written, _ := t["docs_written"].(float64)
				pending, _ := t["changes_pending"].(float64)
				if written+pending > 0 {
					bar.ChangeMax(int(written + pending))
					_ = bar.Set(int(written))
					drawn = true
				}
				break
			}
		}
	}
}

// endpointKey is a replication endpoint as a database name or a URL
// without credentials or trailing slash: how the bar names it and how it
// is matched against the source and target of _active_tasks.
func endpointKey(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	u.User = nil
	return strings.TrimSuffix(u.String(), "/")
}

func summary(res map[string]any) string {
	h, _ := res["history"].([]any)
	if len(h) == 0 {
		return "no changes"
	}
	last, _ := h[0].(map[string]any)
	return fmt.Sprintf("docs_read=%v docs_written=%v doc_write_failures=%v", last["docs_read"], last["docs_written"], last["doc_write_failures"])
}

func tasksCmd(o *opts) *cobra.Command {
	return &cobra.Command{Use: "tasks", Short: "active tasks", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var tasks []map[string]any
			if err := c.do(o.ctx, "GET", "/_active_tasks", nil, &tasks); err != nil {
				return err
			}
			return o.print(tasks, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "TYPE\tNODE\tDATABASE/SOURCE\tPROGRESS")
				for _, t := range tasks {
					what := t["database"]
					if what == nil {
						what = t["source"]
					}
					fmt.Fprintf(w, "%v\t%v\t%v\t%v\n", t["type"], t["node"], what, t["progress"])
				}
			})
		}}
}

// configCmd reads and changes a node's _config (/_node/{node}/_config).
func configCmd(o *opts) *cobra.Command {
	var nodeName string
	cfg := &cobra.Command{Use: "config", Short: "a node's runtime config (_config): get, set, delete"}
	cfg.PersistentFlags().StringVar(&nodeName, "node", "_local", "the node whose config it is (a name from cluster status); another node is reached through this one")
	path := func(parts ...string) string {
		p := "/_node/" + couchpath.Escape(nodeName) + "/_config"
		for _, s := range parts {
			p += "/" + couchpath.Escape(s)
		}
		return p
	}
	cfg.AddCommand(&cobra.Command{Use: "get [SECTION [KEY]]", Short: "print every section, one section or one value", Args: cobra.MaximumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			switch len(args) {
			case 2:
				var v string
				if err := c.do(o.ctx, "GET", path(args...), nil, &v); err != nil {
					return err
				}
				return o.print(v, func(w *tabwriter.Writer) { fmt.Fprintln(w, v) })
			case 1:
				var sec map[string]string
				if err := c.do(o.ctx, "GET", path(args...), nil, &sec); err != nil {
					return err
				}
				return o.print(sec, func(w *tabwriter.Writer) {
					for _, k := range sortedKeys(sec) {
						fmt.Fprintf(w, "%s\t%s\n", k, sec[k])
					}
				})
			}
			var all map[string]map[string]string
			if err := c.do(o.ctx, "GET", path(), nil, &all); err != nil {
				return err
			}
			return o.print(all, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "SECTION\tKEY\tVALUE")
				for _, s := range sortedKeys(all) {
					for _, k := range sortedKeys(all[s]) {
						fmt.Fprintf(w, "%s\t%s\t%s\n", s, k, all[s][k])
					}
				}
			})
		}})
	cfg.AddCommand(&cobra.Command{Use: "set SECTION KEY VALUE", Short: "set a value (a password in admins is stored hashed); prints the old one", Args: cobra.ExactArgs(3),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var old string
			if err := c.do(o.ctx, "PUT", path(args[0], args[1]), args[2], &old); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "section": args[0], "key": args[1], "old": old}, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "set %s/%s (was %q)\n", args[0], args[1], old)
			})
		}})
	cfg.AddCommand(&cobra.Command{Use: "delete SECTION KEY", Short: "delete a value (a setting settee honours goes back to its start value); prints the old one", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var old string
			if err := c.do(o.ctx, "DELETE", path(args[0], args[1]), nil, &old); err != nil {
				return err
			}
			return o.print(map[string]any{"ok": true, "section": args[0], "key": args[1], "old": old}, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "deleted %s/%s (was %q)\n", args[0], args[1], old)
			})
		}})
	return cfg
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
