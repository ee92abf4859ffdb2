# inferbid — build, test and benchmark. Every target installs what it needs
# (Debian packages, the ONNX Runtime library from npm, Go tools and test
# servers from the Go module proxy), so each works on a fresh machine.

SHELL := /bin/bash
GO ?= go
BIN := bin
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)
# Keep the S3 SDK away from the EC2 metadata address in tests.
export AWS_EC2_METADATA_DISABLED := true

# Binaries without cgo, and the ones that load native libraries.
PURE_CMDS := bidding-server inferctl inference-sidecar-tensorflow

# STEP runs one long step so that it is never silent: what it does (with an
# honest estimate) before, a line each minute while it runs, and how long it
# took after (scripts/step.sh).
STEP := scripts/step.sh
# TESTSUMMARY runs go test -json commands and prints a line per package, the
# output of failing tests, progress while silent, the count of checks
# skipped for want of the reference models, and the totals
# (internal/cmd/testsummary).
TESTSUMMARY := .cache/bin/testsummary

.PHONY: image print-image-tag deps-helm test-deploy
.PHONY: all build build-pytorch deps deps-onnx deps-pytorch deps-staticcheck deps-test-servers deps-node-peer deps-wrk deps-tfjs deps-redis \
	test test-go test-pytorch testsummary bench lint proto proto-check demo fuzz models wasm clean

all: build

# Each install is quick when its piece is already there; the estimates are
# for a fresh 2-core machine.
deps-onnx:
	@$(STEP) "ONNX Runtime library into lib/onnxruntime/ (when missing: a 113 MB npm download, about 1 min)" \
	  scripts/install-onnxruntime.sh

deps-pytorch:
	@$(STEP) "Debian's libtorch-dev (when missing: about 1 GB of packages, a few minutes)" \
	  scripts/install-libtorch.sh

deps-test-servers:
	@$(STEP) "S3 and GCS test servers versitygw and fake-gcs-server into $$(go env GOPATH)/bin (when missing: built from source, about 10 min on 2 cores)" \
	  scripts/test-servers.sh install

# deps-node-peer: onnxruntime-node in .cache/node-peer, for the Node.js peer
# of the peer comparison (bench/).
deps-node-peer:
	@$(STEP) "onnxruntime-node for the Node.js peer into .cache/node-peer/ (when missing: about 1 min)" \
	  scripts/install-node-peer.sh

# deps-wrk: Debian's wrk, the load generator of the server-level peer
# comparison (BenchmarkServerPeer, make bench).
deps-wrk:
	@$(STEP) "Debian's wrk (when missing: one small package, seconds)" \
	  scripts/apt-install.sh wrk

# deps-tfjs: TensorFlow.js (pure JavaScript) in .cache/tfjs, the oracle of
# the TensorFlow runtime's op and model tests (runtimes/tensorflow).
deps-tfjs:
	@$(STEP) "TensorFlow.js 4.22.0 (core, cpu backend, converter, layers) into .cache/tfjs/ (when missing: an npm install, about 100 MB on disk, under 1 min)" \
	  scripts/install-tfjs.sh

# deps-helm: helm for the chart's checks (deploy/charttest), from the Go
# module proxy.
deps-helm:
	@$(STEP) "helm v3.22.0 into $$(go env GOPATH)/bin (when missing: go install from the module proxy, about 3 min cold on 2 cores)" \
	  scripts/install-helm.sh

# deps-staticcheck: staticcheck, pinned, for make lint, from the Go module
# proxy (rebuilt when the go in use changes).
deps-staticcheck:
	@$(STEP) "staticcheck v0.8.2 into $$(go env GOPATH)/bin (when missing: go install from the module proxy, about 1 min cold)" \
	  scripts/install-staticcheck.sh

# deps-redis: Debian's redis-server and redis-cli, for the Redis Cluster the
# varstore tests start on 127.0.0.1.
deps-redis:
	@$(STEP) "Debian's redis-server (when missing: a few MB of packages, under 1 min)" \
	  scripts/apt-install.sh redis-server

deps: deps-onnx deps-pytorch deps-test-servers deps-node-peer deps-tfjs deps-helm deps-staticcheck deps-redis

# LDFLAGS stamp the commit into --version (internal/cli.Commit) for builds
# go does not stamp itself (GOFLAGS=-buildvcs=false, git worktrees).
GIT_REV := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DIRTY := $(if $(GIT_REV),$(shell git diff --quiet HEAD 2>/dev/null || echo -modified))
LDFLAGS ?= -X github.com/inferbid/inferbid/internal/cli.Commit=$(GIT_REV)$(GIT_DIRTY)

# build: every binary into bin/. The ONNX sidecar finds ../lib/onnxruntime
# next to itself; the PyTorch sidecar links Debian's libtorch.
build: deps-onnx deps-pytorch
	@mkdir -p $(BIN)
	@$(STEP) "building $(addprefix $(BIN)/,$(PURE_CMDS)) (about 2 min cold on 2 cores, seconds when cached)" \
	  env CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ $(addprefix ./cmd/,$(PURE_CMDS))
	@$(STEP) "building $(BIN)/inference-sidecar-onnx (cgo; about 1 min cold)" \
	  $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/inference-sidecar-onnx
	@$(STEP) "building $(BIN)/inference-sidecar-pytorch (cgo and libtorch's C++ headers; a few minutes cold)" \
	  $(GO) build -ldflags "$(LDFLAGS)" -tags pytorch -o $(BIN)/ ./cmd/inference-sidecar-pytorch

# image: the OCI images (deploy/ociimage; no daemon, no base image) into
# bin/image/: layout/ holding inferbid:TAG (the pure-Go binaries),
# inferbid-onnx:TAG (plus the ONNX sidecar and its libraries) and
# inferbid-pytorch:TAG (plus the PyTorch sidecar and libtorch), and a
# docker-load tarball of each. Same commit, same digests. TAG is the Helm
# chart's appVersion unless IMAGE_TAG says otherwise: the chart's default
# image.tag and the KServe runtimes name the same tag (deploy/README.md;
# deploy/charttest checks they agree). `make print-image-tag` prints it.
IMAGE_TAG ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' deploy/helm/inferbid/Chart.yaml)
print-image-tag:
	@echo $(IMAGE_TAG)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image: deps-onnx deps-pytorch
	@mkdir -p $(BIN)/image/bin
	@$(STEP) "building $(PURE_CMDS) for the image (CGO_ENABLED=0, -trimpath; about 3 min cold on 2 cores, seconds when cached)" \
	  env CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/image/bin/ $(addprefix ./cmd/,$(PURE_CMDS))
	@$(STEP) "building inference-sidecar-onnx for the image (cgo, -trimpath; about 1 min cold)" \
	  $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/image/bin/ ./cmd/inference-sidecar-onnx
	@$(STEP) "building inference-sidecar-pytorch for the image (cgo, -tags pytorch, -trimpath; a few minutes cold)" \
	  $(GO) build -trimpath -ldflags "$(LDFLAGS)" -tags pytorch -o $(BIN)/image/bin/ ./cmd/inference-sidecar-pytorch
	@$(STEP) "writing the OCI layout and tarballs into $(BIN)/image/ (about 1 min: gzip of libtorch's 490 MB dominates)" \
	  env SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) -C deploy run ./cmd/mkimage --bin ../$(BIN)/image/bin \
	  --onnxruntime ../lib/onnxruntime/libonnxruntime.so.1 --pytorch --out ../$(BIN)/image --tag $(IMAGE_TAG)

# demo: the README's main command (TensorFlow sidecar, file:// bucket); it
# also builds bin/inferctl and ends with three commands to try next.
demo:
	scripts/demo.sh

# lint: gofmt, go vet and staticcheck (its default checks; where one is
# wrong for a line, a //lint:ignore there says why), with the PyTorch
# runtime's cgo code under its build tag too.
lint: deps-staticcheck
	@$(STEP) "gofmt -l on every tracked Go file" bash -c \
	  'fmt=$$(gofmt -l $$(git ls-files "*.go" | grep -v "\.pb\.go$$")); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi'
	@$(STEP) "go vet ./... (a few minutes cold on 2 cores, seconds when cached)" $(GO) vet ./...
	@$(STEP) "go vet -tags pytorch on the PyTorch runtime (about 1 min cold)" \
	  $(GO) vet -tags pytorch ./runtimes/pytorch/... ./cmd/inference-sidecar-pytorch/...
	@$(STEP) "staticcheck ./... (about 3 min cold on 2 cores, under 1 min when cached)" staticcheck ./...
	@$(STEP) "staticcheck -tags pytorch on the PyTorch runtime (about 1 min cold)" \
	  staticcheck -tags pytorch ./runtimes/pytorch/... ./cmd/inference-sidecar-pytorch/...
	@$(STEP) "CGO_ENABLED=0 go build ./... (everything but the native runtimes builds without cgo)" \
	  env CGO_ENABLED=0 $(GO) build ./...

# proto: regenerate proto/inferencepb. go generate is the entry point for
# generated code: `go generate ./proto/...` runs the //go:generate directive
# of proto/inferencepb (scripts/gen-proto.sh); proto-check regenerates the
# same way and fails when the committed files differ.
proto:
	$(GO) generate ./proto/...

proto-check:
	@$(STEP) "checking that proto/inferencepb is what protoc generates (installs protoc and its plugins when missing)" \
	  scripts/check-proto.sh

# test: the README's test command. Native libraries and test servers are
# required here: a test that cannot find them fails instead of skipping.
# Tests that need the reference models skip without INFERBID_REFERENCE_MODELS
# (the last lines say how many); CI sets INFERBID_REQUIRE_REFERENCE=1, which
# makes them fail instead. Both go test runs go through TESTSUMMARY, whose
# last line is the totals over both; its exit status is go test's.
TEST_GO_CMD = env INFERBID_REQUIRE_NATIVE=1 INFERBID_REQUIRE_SERVERS=1 INFERBID_REQUIRE_PEER=1 \
	$(GO) test -json -race -count=1 ./...
TEST_PYTORCH_CMD = env INFERBID_REQUIRE_NATIVE=1 $(GO) test -json -tags pytorch -race -count=1 ./runtimes/pytorch/... ./kserve/

test: deps lint proto-check testsummary test-deploy
	@echo "==> every test with -race, then the PyTorch runtime's: a line per package as it ends, progress each silent minute (about 10 min cold on 2 cores, 4 min when cached)"
	@$(TESTSUMMARY) -- $(TEST_GO_CMD) -- $(TEST_PYTORCH_CMD)

# test-deploy: the nested module deploy/ (its own go.mod keeps k8s.io and
# go-containerregistry out of the main one): the images built, unpacked and
# run; the Helm chart linted, rendered and decoded strictly; the KServe
# manifests decoded.
test-deploy: deps-onnx deps-pytorch deps-helm
	@$(STEP) "go vet in deploy/ (about 1 min cold)" $(GO) -C deploy vet ./...
	@# No -race: these tests build and gzip images in one goroutine, and the
	@# detector would make that several times slower for nothing.
	@$(STEP) "go test in deploy/ (image builds, helm lint/template; a few minutes cold on 2 cores)" \
	  env INFERBID_REQUIRE_NATIVE=1 INFERBID_REQUIRE_HELM=1 $(GO) -C deploy test -count=1 ./...

test-go: testsummary
	@$(TESTSUMMARY) -- $(TEST_GO_CMD)

test-pytorch: deps-pytorch testsummary
	@$(TESTSUMMARY) -- $(TEST_PYTORCH_CMD)

# testsummary: the go test -json summarizer, into .cache/bin (seconds).
testsummary:
	@$(GO) build -o $(TESTSUMMARY) ./internal/cmd/testsummary

# bench: the performance budget, printed (never asserted). The last lines are
# the JS path's tail taken apart (BenchmarkTail), a small model's latency and
# both processes' memory while 3 x 114 MiB ONNX models load (BenchmarkLoadStall),
# each runtime's peak RSS during a registration, and the peer comparison
# (bench/doc.go): one request through every layer and through Node.js +
# onnxruntime-node, printed as a table of ratios, and the server-level peer
# comparison (BenchmarkServerPeer): bidding-server and a Node.js HTTP bidder
# driven by wrk, SERVER_PEER_DURATION each. The peer is required here (a
# missing node, onnxruntime-node or wrk fails).
BENCH_FLAGS ?= -run '^$$' -benchmem -count=1
SERVER_PEER_DURATION ?= 10s
bench: deps-onnx deps-pytorch deps-node-peer deps-wrk deps-redis
	$(GO) test $(BENCH_FLAGS) -bench . ./batch/
	$(GO) test $(BENCH_FLAGS) -bench . ./runtimes/onnx/
	$(GO) test $(BENCH_FLAGS) -bench . ./runtimes/tensorflow/benchcmp/
	$(GO) test $(BENCH_FLAGS) -bench . -tags pytorch ./runtimes/pytorch/
	$(GO) test $(BENCH_FLAGS) -bench 'ModelState' ./runtimes/tensorflow/
	$(GO) test $(BENCH_FLAGS) -bench 'MappedEmbedding' -benchtime 1x ./runtimes/tensorflow/
	$(GO) test $(BENCH_FLAGS) -bench 'Rows' -benchtime 2000x ./varstore/
	$(GO) test $(BENCH_FLAGS) -run '^$$' -bench 'ExternalEmbedding' -benchtime 1x ./runtimes/tensorflow/
	$(GO) test $(BENCH_FLAGS) -bench PredictMLP ./sidecar/
	$(GO) test $(BENCH_FLAGS) -bench 'InferenceLayers|ObjectArgument|JSON' -benchtime 2000x ./jsbridge/ ./jsbridge/nativejson/
	$(GO) test $(BENCH_FLAGS) -bench 'V2Infer' -benchtime 2000x ./kserve/
	$(GO) test $(BENCH_FLAGS) -bench 'Isolation' -benchtime 40000x ./jsbridge/
	$(GO) test $(BENCH_FLAGS) -bench '^BenchmarkGroup$$' -benchtime 500x ./jsbridge/
	$(GO) test $(BENCH_FLAGS) -bench 'Wasm' -benchtime 20000x ./jsbridge/
	$(GO) test $(BENCH_FLAGS) -bench 'ServerIsolation' -benchtime 16000x ./cmd/bidding-server/
	$(GO) test $(BENCH_FLAGS) -bench 'HostileNeighbour' -benchtime 1x ./cmd/bidding-server/
	INFERBID_REQUIRE_NATIVE=1 $(GO) test $(BENCH_FLAGS) -bench 'ServerGroups' -benchtime 2000x ./cmd/bidding-server/
	INFERBID_REQUIRE_NATIVE=1 $(GO) test -count=1 -run '^$$' -bench '^BenchmarkTail$$' -benchtime 10000x ./bench/
	INFERBID_REQUIRE_NATIVE=1 $(GO) test -count=1 -run '^$$' -bench '^BenchmarkLoadStall$$' -benchtime 1x ./cmd/bidding-server/
	@echo "peak RSS of a 128 MiB model's registration in a real sidecar, per runtime (sidecartest.ModelMemory):"
	set -o pipefail; INFERBID_REQUIRE_NATIVE=1 $(GO) test -count=1 -v -run 'SidecarModelMemory' ./sidecar/ | grep -E 'model files|^(ok|FAIL|--- FAIL)'
	set -o pipefail; INFERBID_REQUIRE_NATIVE=1 $(GO) test -count=1 -v -run '^TestSidecarModelMemory$$' -tags pytorch ./runtimes/pytorch/ | grep -E 'model files|^(ok|FAIL|--- FAIL)'
	INFERBID_REQUIRE_NATIVE=1 INFERBID_REQUIRE_PEER=1 $(GO) test -count=1 \
	  -run '^TestPeerMatchesRuntime$$' -bench '^BenchmarkPeerComparison$$' ./bench/
	INFERBID_REQUIRE_NATIVE=1 INFERBID_REQUIRE_PEER=1 INFERBID_SERVER_PEER_DURATION=$(SERVER_PEER_DURATION) \
	  $(GO) test -count=1 -run '^TestHTTPBidder$$' -bench '^BenchmarkServerPeer$$' -benchtime 1x ./cmd/bidding-server/

# fuzz: a short run of every fuzz target (the seed corpora run in make test).
FUZZTIME ?= 30s
fuzz: deps-pytorch
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./batch/
	$(GO) test -run '^$$' -fuzz '^FuzzClipN$$' -fuzztime $(FUZZTIME) ./inferr/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./modelstore/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzzminimizetime 2s -fuzztime $(FUZZTIME) ./runtimes/tensorflow/
	$(GO) test -run '^$$' -fuzz '^FuzzWalkMatchesParse$$' -fuzztime $(FUZZTIME) ./jsbridge/
	$(GO) test -run '^$$' -fuzz '^FuzzNativeJSONParse$$' -fuzztime $(FUZZTIME) ./jsbridge/nativejson/
	$(GO) test -run '^$$' -fuzz '^FuzzNativeJSONStringify$$' -fuzztime $(FUZZTIME) ./jsbridge/nativejson/
	$(GO) test -run '^$$' -fuzz '^FuzzParseRuntimeConfig$$' -fuzztime $(FUZZTIME) ./sidecar/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeInferBinary$$' -fuzztime $(FUZZTIME) ./kserve/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeTFServingJSON$$' -fuzztime $(FUZZTIME) ./kserve/
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshalJSONPredict$$' -fuzztime $(FUZZTIME) ./sidecar/
	$(GO) test -run '^$$' -fuzz '^FuzzParseModelInfo$$' -fuzztime $(FUZZTIME) ./runtimes/onnx/
	$(GO) test -run '^$$' -fuzz '^FuzzExternalFiles$$' -fuzztime $(FUZZTIME) ./runtimes/onnx/
	$(GO) test -run '^$$' -fuzz '^FuzzReadFrame$$' -fuzztime $(FUZZTIME) ./sidecar/fastlane/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeInferJSON$$' -fuzztime $(FUZZTIME) ./kserve/
	$(GO) test -run '^$$' -fuzz '^FuzzCheckpointTensors$$' -fuzztime $(FUZZTIME) ./runtimes/tensorflow/
	$(GO) test -run '^$$' -fuzz '^FuzzExternalize$$' -fuzztime $(FUZZTIME) ./runtimes/onnx/
	$(GO) test -run '^$$' -fuzz '^FuzzGenerateBidsBody$$' -fuzztime $(FUZZTIME) ./cmd/bidding-server/
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) ./varstore/
	$(GO) test -run '^$$' -fuzz '^FuzzPreflight$$' -fuzztime $(FUZZTIME) ./runtimes/pytorch/
	$(GO) test -tags pytorch -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./runtimes/pytorch/
	$(GO) test -run '^$$' -fuzz '^FuzzStripTrailingCommas$$' -fuzztime $(FUZZTIME) ./modelstore/
	$(GO) test -run '^$$' -fuzz '^FuzzTensorFromProto$$' -fuzztime $(FUZZTIME) ./sidecar/
	$(GO) test -run '^$$' -fuzz '^FuzzWriteBundle$$' -fuzztime $(FUZZTIME) ./runtimes/tensorflow/tfsave/

# diagram: rewrite the package diagram of docs/architecture.md from go list
# (internal/pkggraph; TestDiagramMatchesImports fails when it is stale).
diagram:
	$(GO) run ./internal/cmd/pkggraph

# models: regenerate the committed test models through their //go:generate
# directives: the ONNX and TorchScript models of runtimes/{onnx,pytorch}/testdata
# and the peer comparison's bench/testdata/pctr.onnx (from the Python scripts,
# installing python3-onnx and python3-torch) and examples/bucket.
models:
	$(GO) generate ./runtimes/onnx ./runtimes/pytorch ./examples

# wasm: rebuild the committed .wasm files (jsbridge/testdata/wasm,
# examples/wasmhelper) from their .wat sources with Debian's wabt, installed
# when missing (scripts/gen-wasm.sh); jsbridge's TestWasmTestdataUpToDate
# compares them.
wasm:
	$(GO) generate ./jsbridge/

clean:
	rm -rf $(BIN)
