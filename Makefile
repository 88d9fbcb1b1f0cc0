.PHONY: build test run bench proto fuzz docker record

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GITSHA  ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -X github.com/settee/settee/node.Version=$(VERSION) -X github.com/settee/settee/node.GitSHA=$(GITSHA)

build:
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o bin/settee ./cmd/settee

# The test command (README, .ci/run): everything with the race detector, then
# the tests that cannot run under -race (several nodes in one process,
# badger's value-log GC: see node/cluster_test.go, httpgw/compact_test.go).
# Those live in files with `//go:build !race`, and scripts/norace.sh runs
# exactly the tests such files declare, found from the files themselves
# (whatever the tests are named; `scripts/norace.sh check` in .ci/run).
# The replication interop with a real CouchDB (interop/couchrepl) runs without
# -race beside the race pass: most of its ~100 s is waiting on CouchDB (its
# scheduler's 30 s backoff, among others), and the replicator's races are
# covered by its own tests; its output follows the race pass's. -parallel 4:
# the parallel tests (httpgw's, the replicator's) mostly wait on servers
# and CouchDB, and at the default of 2 (GOMAXPROCS) the cores sat idle.
# The console's browser tests (interop/console: headless chromium, several
# nodes, so !race) run after it in the same background job: ~1 min, mostly
# waiting on the browser and the nodes. The resource suite (resourcetest:
# hostile requests to a settee process, its /_up and GETs timed within a
# second throughout) runs after the race pass, alone: its bounds are the
# node's, not those of a machine running four test binaries beside it.
test:
	@log=$$(mktemp); (go test -count=1 -timeout 8m ./interop/couchrepl/; a=$$?; go test -count=1 -timeout 5m ./interop/console/; b=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ]) >$$log 2>&1 & pid=$$!; \
	go test -race -timeout 12m -parallel 4 $$(go list ./... | grep -v -e /interop/couchrepl -e /interop/console -e /resourcetest); race=$$?; \
	wait $$pid; interop=$$?; echo "go test -count=1 ./interop/couchrepl/ ./interop/console/ (beside the race pass)"; \
	cat $$log; rm -f $$log; [ $$race -eq 0 ] && [ $$interop -eq 0 ]
	go test -count=1 -timeout 5m ./resourcetest/
	./scripts/norace.sh run -timeout 8m
	cd third_party/badger && go test -race -count=1 -run 'DropUnreferenced|FlushMemtable|Shortened|BackgroundGate|SetteeGate|Watermarks|DropPrefixBesideFlattenAll|EmptyMemFile' . ./y

run:
	go run ./cmd/settee serve

# Re-record the conformance corpus conformance/testdata/*.jsonl from a real
# CouchDB 3.5.2 started with ../shared/couchdb (conformance/doc.go).
record:
	go test ./conformance/ -run '^TestRecord$$' -record -count=1 -v

bench: build
	./bin/settee bench --url $${SETTEE_URL:-http://admin:admin@127.0.0.1:5984}

proto:
	./scripts/genproto.sh

# Every fuzz target, each for FUZZTIME (a seed corpus under testdata/fuzz
# is replayed by the ordinary test run too).
FUZZTIME ?= 30s
fuzz:
	go test ./docjson/ -run '^$$' -fuzz '^FuzzParseDoc$$' -fuzztime $(FUZZTIME)
	go test ./docjson/ -run '^$$' -fuzz '^FuzzParseBulkDocs$$' -fuzztime $(FUZZTIME)
	go test ./docjson/ -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME)
	go test ./docjson/ -run '^$$' -fuzz '^FuzzWalker$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
	go test ./auth/ -run '^$$' -fuzz '^FuzzJWT$$' -fuzztime $(FUZZTIME)
	go test ./rights/ -run '^$$' -fuzz '^FuzzUserDocRoles$$' -fuzztime $(FUZZTIME)
	go test ./revtree/ -run '^$$' -fuzz '^FuzzParseRev$$' -fuzztime $(FUZZTIME)
	go test ./shard/ -run '^$$' -fuzz '^FuzzDecodeInfo$$' -fuzztime $(FUZZTIME)
	go test ./shard/ -run '^$$' -fuzz '^FuzzAliasBodyRecord$$' -fuzztime $(FUZZTIME)
	go test ./coordinator/ -run '^$$' -fuzz '^FuzzDecodeSeq$$' -fuzztime $(FUZZTIME)
	go test ./mango/ -run '^$$' -fuzz '^FuzzSelector$$' -fuzztime $(FUZZTIME)
	go test ./mango/ -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(FUZZTIME)
	go test ./mango/ -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME)
	go test ./mango/ -run '^$$' -fuzz '^FuzzParseRequests$$' -fuzztime $(FUZZTIME)
	go test ./collate/ -run '^$$' -fuzz '^FuzzAppendKey$$' -fuzztime $(FUZZTIME)
	go test ./couchdoc/ -run '^$$' -fuzz '^FuzzReadRelated$$' -fuzztime $(FUZZTIME)
	go test ./couchdoc/ -run '^$$' -fuzz '^FuzzInlineToFollows$$' -fuzztime $(FUZZTIME)
	go test ./couchdoc/ -run '^$$' -fuzz '^FuzzWalk$$' -fuzztime $(FUZZTIME)
	go test ./httpgw/ -run '^$$' -fuzz '^FuzzQueryParams$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
	go test ./httpgw/ -run '^$$' -fuzz '^FuzzRequestBodies$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
	go test ./httpgw/ -run '^$$' -fuzz '^FuzzMultipartPut$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
	go test ./httpgw/ -run '^$$' -fuzz '^FuzzGzipBody$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
	go test ./mango/ -run '^$$' -fuzz '^FuzzDecodeFields$$' -fuzztime $(FUZZTIME)
	go test ./etf/ -run '^$$' -fuzz '^FuzzAppendJSON$$' -fuzztime $(FUZZTIME)
	go test ./etf/ -run '^$$' -fuzz '^FuzzExactFloat$$' -fuzztime $(FUZZTIME)
	go test ./cdeflate/ -run '^$$' -fuzz '^FuzzDeflate$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s
	./scripts/checkfuzz.sh

# The Docker image settee:dev, FROM scratch around the static binary.
docker:
	rm -rf docker/ctx && mkdir -p docker/ctx/data
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o docker/ctx/settee ./cmd/settee
	cp /etc/ssl/certs/ca-certificates.crt docker/ctx/
	printf 'settee:x:65532:65532:settee:/data:/settee\n' > docker/ctx/passwd
	docker build -t settee:dev -f Dockerfile docker/ctx
