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

.PHONY: all build build-pytorch deps deps-onnx deps-pytorch deps-test-servers \
	test test-go test-pytorch bench lint proto proto-check demo fuzz models clean

all: build

deps-onnx:
	scripts/install-onnxruntime.sh

deps-pytorch:
	scripts/install-libtorch.sh

deps-test-servers:
	scripts/test-servers.sh install

deps: deps-onnx deps-pytorch deps-test-servers

# build: every binary into bin/. The ONNX sidecar finds ../lib/onnxruntime
# next to itself; the PyTorch sidecar links Debian's libtorch.
build: deps-onnx deps-pytorch
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(PURE_CMDS))
	$(GO) build -o $(BIN)/ ./cmd/inference-sidecar-onnx
	$(GO) build -tags pytorch -o $(BIN)/ ./cmd/inference-sidecar-pytorch

# demo: the README's main command (TensorFlow sidecar, file:// bucket).
demo:
	scripts/demo.sh

lint:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags pytorch ./runtimes/pytorch/... ./cmd/inference-sidecar-pytorch/...
	CGO_ENABLED=0 $(GO) build ./...

# proto: regenerate proto/inferencepb. go generate is the entry point for
# generated code: `go generate ./proto/...` runs the //go:generate directive
# of proto/inferencepb (scripts/gen-proto.sh); proto-check regenerates the
# same way and fails when the committed files differ.
proto:
	$(GO) generate ./proto/...

proto-check:
	scripts/check-proto.sh

# test: the README's test command. Native libraries and test servers are
# required here: a test that cannot find them fails instead of skipping.
test: deps lint proto-check test-go test-pytorch

test-go:
	INFERBID_REQUIRE_NATIVE=1 INFERBID_REQUIRE_SERVERS=1 $(GO) test -race -count=1 ./...

test-pytorch: deps-pytorch
	INFERBID_REQUIRE_NATIVE=1 $(GO) test -tags pytorch -race -count=1 ./runtimes/pytorch/...

# bench: the performance budget, printed (never asserted).
BENCH_FLAGS ?= -run '^$$' -benchmem -count=1
bench: deps-onnx deps-pytorch
	$(GO) test $(BENCH_FLAGS) -bench . ./batch/
	$(GO) test $(BENCH_FLAGS) -bench . ./runtimes/onnx/
	$(GO) test $(BENCH_FLAGS) -bench . ./runtimes/tensorflow/benchcmp/
	$(GO) test $(BENCH_FLAGS) -bench . -tags pytorch ./runtimes/pytorch/
	$(GO) test $(BENCH_FLAGS) -bench PredictMLP ./sidecar/
	$(GO) test $(BENCH_FLAGS) -bench 'InferenceLayers|ObjectArgument' -benchtime 2000x ./jsbridge/

# fuzz: a short run of every fuzz target (the seed corpora run in make test).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./batch/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./modelstore/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzzminimizetime 2s -fuzztime $(FUZZTIME) ./runtimes/tensorflow/
	$(GO) test -run '^$$' -fuzz '^FuzzWalkMatchesParse$$' -fuzztime $(FUZZTIME) ./jsbridge/
	$(GO) test -run '^$$' -fuzz '^FuzzParseRuntimeConfig$$' -fuzztime $(FUZZTIME) ./sidecar/
	$(GO) test -run '^$$' -fuzz '^FuzzParseModelInfo$$' -fuzztime $(FUZZTIME) ./runtimes/onnx/
	$(GO) test -run '^$$' -fuzz '^FuzzReadFrame$$' -fuzztime $(FUZZTIME) ./sidecar/fastlane/

# models: regenerate the committed test models (needs python3-onnx, python3-torch):
# the ONNX and TorchScript models of runtimes/{onnx,pytorch}/testdata from the
# Python scripts, and examples/bucket through its //go:generate directive.
models:
	scripts/apt-install.sh python3-onnx python3-numpy
	/usr/bin/python3 scripts/gen-onnx-models.py
	scripts/install-libtorch.sh --python
	/usr/bin/python3 scripts/gen-pytorch-models.py
	$(GO) generate ./examples

clean:
	rm -rf $(BIN)
