// Command settee is the one settee binary: serve runs a node, bench runs
// CouchDB's fabric_bench workload against any CouchDB-compatible URL.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: settee <command> [flags]

commands:
  serve     run a node (single node, embedded store)
  bench     run the fabric_bench workload against a URL
  repbench  run rep_bench's workload: load a source, replicate, time it
  admin     operate a node or cluster (cluster, db, compact, replicate, tasks, ping)
  version   print the version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	case "repbench":
		err = runRepBench(os.Args[2:])
	case "admin":
		err = runAdmin(os.Args[2:])
	case "version", "--version", "-v":
		err = version()
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "settee: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "settee:", err)
		os.Exit(1)
	}
}
